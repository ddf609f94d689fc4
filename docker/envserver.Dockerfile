# ThinkingBox Web training environment server (OpenEnv protocol: /ws, /mcp, /schema, /metadata,
# /state, /health; our REST /reset /step /close). Manifest: tb_envserver/openenv.yaml.
# Build from the repository root:  docker build -f docker/envserver.Dockerfile -t thinkingbox-env .
# Run:  docker run -p 8765:8765 thinkingbox-env            (built-in suite "starter")
#       docker run -p 8765:8765 -e TB_ENVSERVER_SUITE=retail thinkingbox-env
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TB_ENVSERVER_SUITE=starter

RUN groupadd --system tb && useradd --system --gid tb --home-dir /app --shell /usr/sbin/nologin tb
WORKDIR /app

# Dependencies first (cached layer): only the files that decide them.
COPY pyproject.toml constraints.txt ./
COPY tb_engine/__init__.py tb_engine/__init__.py
COPY tb_envserver/__init__.py tb_envserver/__init__.py
COPY thinkingbox_web/__init__.py thinkingbox_web/__init__.py
COPY apps/__init__.py apps/__init__.py
RUN pip install -c constraints.txt . && pip uninstall -y thinkingbox-web

# The env server needs the engine and itself only (no Django, no database).
COPY tb_engine tb_engine
COPY tb_envserver tb_envserver

USER tb
EXPOSE 8765
HEALTHCHECK --interval=30s --timeout=5s --retries=3 \
    CMD ["python", "-c", "import json,sys,urllib.request as u; sys.exit(json.load(u.urlopen('http://127.0.0.1:8765/health', timeout=4)).get('status') != 'healthy')"]
# Shell form so TB_ENVSERVER_SUITE is expanded; exec so SIGTERM reaches the server.
CMD exec python -m tb_envserver --host 0.0.0.0 --port 8765 --suite "$TB_ENVSERVER_SUITE"
