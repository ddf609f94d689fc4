"""ThinkingBox-Bench compatibility: dataset import, tb infer results import, tb agg figures, MCP backend.

Everything returns plain dataclasses and raises one error type, ThinkingBoxFormatError, carrying
file / line / test, so the Django import commands can wrap these functions directly.
"""

from tb_engine.thinkingbox.agg import format_tb_agg_summary, our_figures, tb_agg_figures
from tb_engine.thinkingbox.dataset import (
    DatasetRead,
    UnsupportedScenario,
    init_config,
    parse_dataset,
    parse_scenario,
    parse_test_file,
    read_dataset,
    read_test_list,
)
from tb_engine.thinkingbox.declarations import ServerDeclarations, server_declarations
from tb_engine.thinkingbox.effects import EffectsComparison, compare_effects, effects_states
from tb_engine.thinkingbox.errors import ImportProblem, ThinkingBoxFormatError
from tb_engine.thinkingbox.results import (
    TbRecord,
    TbRowKey,
    iter_tb_lines,
    iter_tb_results,
    iter_tb_row_keys,
    parse_tb_line,
    parse_tb_results,
    parse_tb_row,
)

__all__ = [
    "DatasetRead",
    "EffectsComparison",
    "ImportProblem",
    "ServerDeclarations",
    "TbRecord",
    "TbRowKey",
    "ThinkingBoxFormatError",
    "UnsupportedScenario",
    "compare_effects",
    "effects_states",
    "format_tb_agg_summary",
    "init_config",
    "our_figures",
    "parse_dataset",
    "parse_scenario",
    "parse_test_file",
    "iter_tb_lines",
    "iter_tb_results",
    "iter_tb_row_keys",
    "parse_tb_line",
    "parse_tb_results",
    "parse_tb_row",
    "read_dataset",
    "read_test_list",
    "server_declarations",
    "tb_agg_figures",
]
