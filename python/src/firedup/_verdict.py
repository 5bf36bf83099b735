"""The verdict block: a JSON verdict (``firedup run --json``) in the lines a person reads when a
start fails (verdict, signature, reason, decisive line and its number, context, log)."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["verdict_block"]


def verdict_block(v: Mapping[str, Any]) -> str:
    """``v`` (a JSON verdict object) as a few lines of text."""
    head = f"firedup: {str(v.get('verdict', '?')).upper()}"
    if v.get("signature"):
        head += f" ({v['signature']})"
    if v.get("elapsed_s") is not None:
        head += f" after {v['elapsed_s']}s"
    lines = [head]
    if v.get("reason"):
        lines.append(f"  reason:  {v['reason']}")
    line = v.get("line")
    if line:
        lines.append(f"  line {line.get('number')}: {line.get('text')}")
    context = v.get("context") or []
    if context:
        lines.append("  context:")
        decisive = line.get("text") if line else None
        lines.extend(f"  {'>' if c == decisive else ' '} {c}" for c in context)
    if v.get("phase"):
        lines.append(f"  phase:   {v['phase']}")
    if v.get("exit"):
        e = v["exit"]
        how = f"exit code {e['code']}" if e.get("code") is not None else f"signal {e.get('signal')}"
        lines.append(f"  exit:    {how}")
    if v.get("log"):
        lines.append(f"  log:     {v['log']}")
    if v.get("run_id"):
        lines.append(f"  run:     {v['run_id']} (firedup logs {v['run_id']})")
    return "\n".join(lines)
