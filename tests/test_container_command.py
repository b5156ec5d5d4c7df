"""Container command lines as data: every word quoted once, the engines' own spellings, names checked."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import InvalidFlag
from toolkit.host.container_command import (
    ContainerRun,
    container_name,
    exec_prefix,
    inspect_argv,
    parse_running,
    remove_argv,
    run_argv,
    stop_argv,
    throwaway_prefix,
)
from toolkit.host.shell import join

TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=24)
ENV_NAME = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)


@settings(max_examples=80, deadline=None)
@given(image=TEXT, mounts=st.lists(TEXT, max_size=3), env=st.dictionaries(ENV_NAME, TEXT, max_size=3),
       command=TEXT, options=st.lists(TEXT.map(lambda w: "--" + w), max_size=2), engine=st.sampled_from(["docker",
                                                                                                       "podman"]))
def test_every_word_reaches_the_engine_as_written(image: str, mounts: list[str], env: dict[str, str], command: str,
                                                  options: list[str], engine: str) -> None:
    run = ContainerRun(image=image, mounts=tuple(mounts), env=tuple(env.items()), options=tuple(options))
    argv = run_argv(run, engine=engine, name="sv", command=command, port=30000)  # type: ignore[arg-type]
    assert shlex.split(join(argv)) == argv
    assert argv[-5:] == ["--entrypoint=", image, "bash", "-c", command]
    # each mount follows its own -v, in order (a mount spelt like a flag, "-p" or "-v", is read as a value)
    words, given_mounts = iter(argv[:-5]), []
    for word in words:
        if word == "-v":
            given_mounts.append(next(words))
    assert given_mounts == mounts
    for name, value in env.items():
        assert f"{name}={value}" in argv


def test_the_engines_spell_gpus_their_own_way() -> None:
    run = ContainerRun(image="lmsysorg/sglang:v0.5.4", gpus="0,1", mounts=("/models:/models:ro",))
    docker = run_argv(run, engine="docker", name="sv", command="exec x", port=30000)
    podman = run_argv(run, engine="podman", name="sv", command="exec x", port=30000)
    assert docker == ["docker", "run", "--name", "sv", "--init", "--gpus", "device=0,1", "--ipc=host",
                      "-p", "30000:30000", "-v", "/models:/models:ro", "--entrypoint=", "lmsysorg/sglang:v0.5.4",
                      "bash", "-c", "exec x"]
    assert podman[5:9] == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=1"]
    everything = run_argv(ContainerRun(image="i"), engine="docker", name="sv", command="c", port=None)
    assert everything[5:7] == ["--gpus", "all"] and "-p" not in everything


def test_the_servers_port_is_published_once_and_never_on_the_host_network() -> None:
    def published(run: ContainerRun) -> list[str]:
        argv = run_argv(run, engine="docker", name="sv", command="c", port=8000)
        return [argv[i + 1] for i, word in enumerate(argv) if word == "-p"]

    assert published(ContainerRun(image="i")) == ["8000:8000"]
    assert published(ContainerRun(image="i", ports=((18000, 8000),))) == ["18000:8000"]
    assert published(ContainerRun(image="i", ports=((9000, 9000),))) == ["9000:9000", "8000:8000"]
    assert published(ContainerRun(image="i", network="host")) == []
    throwaway = throwaway_prefix(ContainerRun(image="i", ports=((9000, 9000),)), engine="podman",
                                 engine_options=["--runtime", "runc"])
    assert throwaway[:6] == ["podman", "--runtime", "runc", "run", "--rm", "-i"] and "-p" not in throwaway
    assert throwaway[-2:] == ["--entrypoint=", "i"]


def test_a_root_filesystem_takes_the_place_of_the_image() -> None:
    argv = run_argv(ContainerRun(rootfs="/srv/root fs", gpus=None, ipc_host=False, init=False), engine="podman",
                    name="sv", command="c", port=None)
    assert argv == ["podman", "run", "--name", "sv", "--entrypoint=", "--rootfs", "/srv/root fs", "bash", "-c", "c"]


def test_the_other_commands() -> None:
    assert exec_prefix("box", engine="podman", engine_options=["--runtime", "runc"]) == [
        "podman", "--runtime", "runc", "exec", "-i", "box"]
    assert inspect_argv("box", engine="docker") == ["docker", "inspect", "--format", "{{.State.Running}}", "box"]
    assert stop_argv("box", 2.5, engine="docker") == ["docker", "stop", "-t", "3", "box"]
    assert stop_argv("box", 0, engine="podman") == ["podman", "stop", "-t", "0", "box"]
    assert remove_argv("box", engine="docker") == ["docker", "rm", "-f", "box"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "an image or"),
        ({"image": "i", "rootfs": "/r"}, "an image or"),
        ({"image": "i", "options": ("shm-size=1g",)}, "does not start with '-'"),
        ({"image": "i", "env": (("1X", "v"),)}, "not a valid environment variable name"),
        ({"image": "i\x00"}, "NUL byte"),
    ],
)
def test_a_container_that_cannot_be_made_is_refused_with_what_to_do(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidFlag, match=message):
        ContainerRun(**kwargs)  # type: ignore[arg-type]


def test_names_are_ones_both_engines_take() -> None:
    assert container_name("toolkit-sglang-sim EAGLE3 steps=2-2026") == "toolkit-sglang-sim-EAGLE3-steps-2-2026"
    assert container_name("--x") == "x"
    with pytest.raises(InvalidFlag, match="not a container name"):
        exec_prefix("-rm", engine="docker")


# What the engines print (podman 4.3.1 here; docker 24's CLI) when asked about a container.
@pytest.mark.parametrize(
    ("exit_code", "stdout", "stderr", "answer"),
    [
        (0, "true\n", "", True),
        (0, "false\n", "", False),
        (125, "", 'Error: inspecting object: no such object: "box"\n', None),
        (1, "[]\n", "Error: No such object: box\n", None),
    ],
)
def test_inspects_answer_is_read(exit_code: int, stdout: str, stderr: str, answer: bool | None) -> None:
    assert parse_running(exit_code, stdout, stderr) is answer


def test_an_engine_that_does_not_answer_is_an_error() -> None:
    with pytest.raises(ValueError, match="Cannot connect to the Docker daemon"):
        parse_running(1, "", "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n")
