"""Dataset rows and run lines for the offline figures: a travel assistant, three expected calls per case.

The run's calls vary by case (exact, case/whitespace differences, a wrong tool, a swapped order, a missing call
with arguments as a JSON string), so every metric has work to do. The same cases feed our scorer and the peers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CITIES = ("Paris", "Lisbon", "Berlin", "Madrid", "Rome", "Vienna", "Oslo", "Prague")
AIRPORTS = ("CDG", "LIS", "BER", "MAD", "FCO", "VIE", "OSL", "PRG")

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "name": "search_flights",
        "description": "Find flights",
        "parameters": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "date": {"type": "string", "format": "date"},
            },
            "required": ["origin", "destination", "date"],
        },
    },
    {
        "type": "function",
        "name": "get_weather",
        "description": "Weather forecast",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
            "required": ["city"],
        },
    },
    {
        "type": "function",
        "name": "book_hotel",
        "description": "Book a hotel",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "nights": {"type": "integer", "minimum": 1},
                "guests": {"type": "integer", "minimum": 1},
            },
            "required": ["city", "nights"],
        },
    },
]


def expected_calls(i: int) -> list[dict[str, Any]]:
    a, b = i % len(CITIES), (i * 3 + 1) % len(CITIES)
    if a == b:
        b = (b + 1) % len(CITIES)
    return [
        {
            "name": "search_flights",
            "args": {"origin": AIRPORTS[a], "destination": AIRPORTS[b], "date": "2026-12-0" + str(1 + i % 9)},
        },
        {"name": "get_weather", "args": {"city": CITIES[b], "days": 3}},
        {"name": "book_hotel", "args": {"city": CITIES[b], "nights": 2 + i % 3}},
    ]


def actual_calls(i: int) -> list[dict[str, Any]]:
    """What the agent did in case ``i``: ``{"name", "arguments"}`` with arguments as an object (or JSON text)."""
    calls = [{"name": c["name"], "arguments": dict(c["args"])} for c in expected_calls(i)]
    variant = i % 5
    if variant == 1:  # the same call with case and whitespace differences (normalisation)
        calls[1]["arguments"]["city"] = " " + calls[1]["arguments"]["city"].lower() + " "
    elif variant == 2:  # a wrong tool
        calls[1]["name"] = "get_forecast"
    elif variant == 3:  # order swapped
        calls[0], calls[1] = calls[1], calls[0]
    elif variant == 4:  # a missing call, an extra argument, arguments as JSON text
        calls = calls[:2]
        calls[1]["arguments"]["units"] = "metric"
        calls[0]["arguments"] = json.dumps(calls[0]["arguments"])
    return calls


def dataset_row(i: int) -> dict[str, Any]:
    return {
        "id": f"case-{i}",
        "user_input": f"Plan a trip: flights, the weather and a hotel (request {i})",
        "available_tools": TOOLS,
        "expected_tool_calls": expected_calls(i),
        "difficulty": ("easy", "medium", "hard")[i % 3],
    }


def run_line(i: int) -> dict[str, Any]:
    return {"id": f"case-{i}", "tool_calls": actual_calls(i)}


def arguments_object(arguments: Any) -> dict[str, Any]:
    value = json.loads(arguments) if isinstance(arguments, str) else arguments
    return value if isinstance(value, dict) else {}


def write_files(folder: Path, cases: int) -> tuple[Path, Path]:
    """A JSONL dataset and a JSONL run file of ``cases`` cases; returns their paths."""
    import orjson

    dataset, runs = folder / f"dataset-{cases}.jsonl", folder / f"runs-{cases}.jsonl"
    with dataset.open("wb") as d, runs.open("wb") as r:
        for i in range(cases):
            d.write(orjson.dumps(dataset_row(i)) + b"\n")
            r.write(orjson.dumps(run_line(i)) + b"\n")
    return dataset, runs


def cycle(pool: int, count: int) -> Iterator[int]:
    """``count`` case indices over a pool of ``pool`` distinct cases."""
    for n in range(count):
        yield n % pool
