"""Contracts against the real releases: every preset, hint and simulator flag exists in the release it is for.

The flag lists in toolkit/engines/flags were captured from each release's own argument parser
(``scripts/engine_contracts.py``); a new release is one command away
(``python scripts/engine_contracts.py --engine sglang --version X``, then add X to its profile's
``flag_releases``) and these tests then check everything the toolkit renders against it.
"""

from __future__ import annotations

import re

import pytest

from toolkit.engines import PROFILES, RELEASE_HINTS, profile_for
from toolkit.logs.packs import Hints
from toolkit.server.hints import FAMILIES, release_hint
from toolkit.server.spec import ServerSpec
from toolkit.sim.args import build_parser
from toolkit.sim.release import KNOWN_CONDITIONS, EnvContext, SimRelease, condition_holds, release_from_argv

CAPTURED = [(engine, line, release) for engine, lines in PROFILES.items() for line in lines
            for release in line.flag_releases]
IDS = [f"{engine}-{release}" for engine, _, release in CAPTURED]
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _flags_in(text: str) -> set[str]:
    return set(_FLAG.findall(text))


@pytest.mark.parametrize("engine, line, release", CAPTURED, ids=IDS)
def test_every_preset_flag_exists_in_every_release(engine: str, line: object, release: str) -> None:
    have = profile_for(engine, release).flags(release)
    spec = {"sglang": ServerSpec.sglang("m", tp=8), "vllm": ServerSpec.vllm("m", tp=8, host="0.0.0.0"),
            "transformers": ServerSpec.transformers(model="m")}[engine]
    missing = [name for name, _ in spec.flags if name not in have]
    assert not missing, f"{engine} {release} has no {missing} (the preset renders them)"


def test_vllm_speculative_config_and_api_key_exist_where_the_presets_use_them() -> None:
    for release in profile_for("vllm", "0.33.0").flag_releases:
        assert "--speculative-config" in profile_for("vllm", release).flags(release)
        assert "--api-key" in profile_for("vllm", release).flags(release)
    assert "--api-key" in profile_for("sglang", "0.5.23").flags("0.5.23")


@pytest.mark.parametrize("engine, line, release", [c for c in CAPTURED if c[0] in ("sglang", "vllm")],
                         ids=[i for i, c in zip(IDS, CAPTURED, strict=True) if c[0] in ("sglang", "vllm")])
def test_every_hint_names_only_flags_of_the_release(engine: str, line: object, release: str) -> None:
    """What a failure's hint tells the user to try must exist in the release that failed."""
    have = profile_for(engine, release).flags(release)
    allowed = {"--help", "--pid"}  # `py-spy dump --pid`, `--help`: not engine flags
    for hint, family in FAMILIES.items():
        shown = release_hint(hint, engine, release) or ""
        wrong = sorted(f for f in _flags_in(shown) - allowed if f not in have)
        assert not wrong, f"{engine} {release} hint {family} names {wrong}: {shown}"


def test_the_generic_hints_are_replaced_where_they_name_flags() -> None:
    assert "--cuda-graph-max-bs" in Hints.CUDA_GRAPH  # the pack's text, written for both engines
    assert "--cuda-graph-max-bs-decode" in (release_hint(Hints.CUDA_GRAPH, "sglang", "0.5.23") or "")
    assert "--enforce-eager" in (release_hint(Hints.CRASH, "vllm", "0.6.6") or "")
    assert {h.family for h in RELEASE_HINTS} <= set(FAMILIES.values())


def _sim_options(release: SimRelease) -> set[str]:
    parser = build_parser(release.engine, release)
    sim_group = next(g for g in parser._action_groups if g.title and g.title.startswith("simulator"))
    sim_actions = set(map(id, sim_group._group_actions))
    return {o for action in parser._actions if id(action) not in sim_actions for o in action.option_strings}


@pytest.mark.parametrize("engine, line, release", CAPTURED, ids=IDS)
def test_the_simulator_accepts_exactly_the_releases_flags(engine: str, line: object, release: str) -> None:
    """Every option the simulator's parser has (its own group aside) is one of the release's, and every
    one of the release's is accepted: a removed flag fails as the release fails."""
    sim = release_from_argv(("--sim-engine-version", release), engine)
    have = sim.flags.names
    options = _sim_options(sim)
    extra = sorted(options - have)
    assert not extra, f"the simulator of {engine} {release} accepts {extra}, which the release does not"
    unaccepted = sorted(have - options)
    assert not unaccepted, f"the simulator of {engine} {release} rejects {unaccepted}, which the release accepts"


def test_every_condition_of_every_profile_is_known_to_the_simulator() -> None:
    """The simulator evaluates each write's condition (TP > 1, CUDA graphs on, a flag's value); one it does not
    know would make it refuse to start, so a new profile fact needs a line in KNOWN_CONDITIONS."""
    context = EnvContext(tp=2, cuda_graph=True, flags=frozenset(), values={})
    conditions = {w.condition for lines in PROFILES.values() for p in lines for w in p.env_writes if w.condition}
    assert conditions and KNOWN_CONDITIONS
    for condition in sorted(conditions):
        condition_holds(condition, context)  # raises ValueError naming an unknown one
