"""The engine's side of training: the RL environment's episodes (``environment``) and pool files (``pool``).

The HTTP server that exposes an ``Environment`` to trainers is the sibling package ``tb_envserver``.
"""

from tb_engine.training.environment import EnvError, Environment, EvaluationOnlyError

__all__ = ["EnvError", "Environment", "EvaluationOnlyError"]
