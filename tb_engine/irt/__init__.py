"""Item response models for adaptive campaigns (docs/adaptive.md): calibrate, estimate, plan, validate.

* ``model``        the 2PL with campaign consistency and a campaign-by-task random effect
* ``calibration``  fitting it on stored campaigns (SciPy's L-BFGS-B)
* ``estimate``     a campaign's ability and its full-suite figures, *estimated* (SPEC §9)
* ``adaptive``     next task by information, adaptive repeats (SPEC §6 posterior), stopping
* ``validation``   leave-one-campaign-out replay
* ``synthetic``    a larger suite derived from the starter suite, simulated outcomes on it
"""

from tb_engine.irt.adaptive import AdaptiveConfig, Plan, Replay, plan, replay, settle
from tb_engine.irt.calibration import Calibration, CalibrationError, calibrate
from tb_engine.irt.estimate import Ability, ability_posterior, estimate_figures
from tb_engine.irt.validation import CampaignOutcomes, Validation, leave_one_out, observed_figures

__all__ = [
    "Ability",
    "AdaptiveConfig",
    "Calibration",
    "CalibrationError",
    "CampaignOutcomes",
    "Plan",
    "Replay",
    "Validation",
    "ability_posterior",
    "calibrate",
    "estimate_figures",
    "leave_one_out",
    "observed_figures",
    "plan",
    "replay",
    "settle",
]
