"""`torch.compile` compiling a frame again, timed by the hooks (hooks/torch_compiles.py) through
TorchDynamo's compile callbacks: real torch, real compiles (the `eager` backend: TorchDynamo's
capture without a C++ compiler). A frame's first compile is warm-up."""

from __future__ import annotations

import os

import pytest
from hookspans import Collected

from gpuwhy.wire import RETRACE_EVENT

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # every test compiles with TorchDynamo


@pytest.fixture(autouse=True)
def fresh_compiles() -> None:
    torch._dynamo.reset()  # no frame compiled by an earlier test


def compiled_again(collected: Collected) -> list[dict[str, object]]:
    return [event.data for event in collected.events(RETRACE_EVENT)]


def test_a_new_shape_compiles_a_static_model_again_once_per_shape(hooks: Collected) -> None:
    model = torch.compile(torch.nn.Linear(8, 4), backend="eager", dynamic=False)
    for rows in (16, 16, 10, 16, 10, 7):
        model(torch.ones(rows, 8))
    found = compiled_again(hooks)
    assert len(found) == 2  # 10 rows, then 7
    assert {event["pid"] for event in found} == {os.getpid()}
    assert all(str(event["function"]).startswith("frame ") for event in found)
    assert all(isinstance(e["duration_ns"], int) and e["duration_ns"] > 0 for e in found)


def test_a_dynamic_model_takes_every_shape_in_one_compile(hooks: Collected) -> None:
    model = torch.compile(torch.nn.Linear(8, 4), backend="eager", dynamic=True)
    for rows in (16, 10, 7, 12):
        model(torch.ones(rows, 8))
    assert compiled_again(hooks) == []


def test_without_the_hooks_nothing_is_heard(collected: Collected) -> None:
    model = torch.compile(torch.nn.Linear(8, 4), backend="eager", dynamic=False)
    for rows in (16, 10):
        model(torch.ones(rows, 8))
    assert collected.events(RETRACE_EVENT) == []
