"""OpenEnv-style HTTP server for RL trainers over ``tb_engine.training.Environment``: one SQLite
sandbox per episode, the grader's verdict as reward. Imports the engine, never Django."""

from tb_envserver.server import EnvServer

__all__ = ["EnvServer"]
