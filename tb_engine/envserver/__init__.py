"""OpenEnv-style HTTP environment for RL trainers: one SQLite sandbox per episode, verdict as reward."""

from tb_engine.envserver.episodes import EnvError, Environment, EvaluationOnlyError
from tb_engine.envserver.server import EnvServer

__all__ = ["EnvError", "EnvServer", "Environment", "EvaluationOnlyError"]
