"""Throughput of ``extract_many``: batch sizes, static against continuous batching, the
shared prompt prefix, and formcast against free decoding.

Two suites, each printing ratios taken within the same run:

``--suite batching`` (the default): SROIE receipts, the default model, greedy,
``Receipt`` from ``sroie.py`` and its default prompt. For each batch size (default 1, 4,
8, 16) the same receipts are extracted in every mode: ``batching="static"`` (a batch
runs until all its rows end) and ``"continuous"`` (a receipt joins as soon as a row is
free), each with ``share_prefix=False`` and ``True``; at batch 1 the two batchings are
the same and run once. Per run: receipts/s, its ratio against batch 1 with the same
prefix setting and against batch 1 without the prefix (one receipt at a time, the whole
prompt prefilled), output tokens/s, and where the time went: prefill passes, decoding
passes (every forward pass is timed) and the host work between them (constraint,
cursors, cache bookkeeping: the run's time less its passes). Then the prefill the shared
prefix saved (tokens fed, padding included, and seconds of prefill passes, per batch
size and batching) and the tokens/s of free decoding (transformers ``generate``: the same
model and prompts, greedy, no constraint, left-padded batches of the same size, ending
at EOS or the budget, over the first ``--free-count`` receipts, at least a batch) against
formcast's continuous runs with the shared prefix.

``--suite models``: formcast (continuous, shared prefix, one attempt per receipt) against
free decoding, output tokens/s, at batch 1, 8 and 32, for the default model and for a
randomly initialised Llama of about 1.1B parameters built from a config (no download;
its outputs are noise, its costs are those of a real model of that shape). Meant for a
GPU (``--device cuda --dtype bfloat16``); ``--compile`` runs both sides with a static
KV cache and ``torch.compile``.

    python benchmarks/throughput.py --count 16
    python benchmarks/throughput.py --count 8 --batch-sizes 1 8 --no-free --profile
    python benchmarks/throughput.py --suite models --device cuda --dtype bfloat16 --count 64
    python benchmarks/throughput.py --suite models --device cuda --dtype bfloat16 --count 64 \
        --compile
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from sroie import Receipt, load_receipts  # the script's folder is on sys.path

import formcast
from formcast.constraint import output_spec
from formcast.extraction.extractor import DEFAULT_INSTRUCTIONS


@dataclass
class Pass:
    """One forward pass: rows, new tokens per row (padding included), seconds."""

    rows: int
    width: int
    seconds: float
    prefill: bool


class TimedModel(torch.nn.Module):
    """The model, with the shape and wall time of every forward pass.

    A pass is a prefill when the cache it extends holds fewer columns than the shortest
    prompt: only a fresh cache, or one holding the shared prefix, is that short (a
    running row sees its whole prompt). On a GPU each pass is synchronised to be timed,
    so the overlap of host and device work is lost while profiling."""

    def __init__(self, model: Any, shortest_prompt: int) -> None:
        super().__init__()
        self.inner = model
        self.config = model.config
        self.shortest_prompt = shortest_prompt
        self.passes: list[Pass] = []

    def forward(self, **inputs: Any) -> Any:
        cached = inputs["past_key_values"].get_seq_length()
        _synchronise()
        started = time.perf_counter()
        out = self.inner(**inputs)
        _synchronise()
        rows, width = inputs["input_ids"].shape
        prefill = width > 1 and cached < self.shortest_prompt
        self.passes.append(Pass(rows, width, time.perf_counter() - started, prefill))
        return out


def _synchronise() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


@dataclass
class Run:
    """One timed ``extract_many`` over the receipts."""

    batch_size: int
    batching: str
    share_prefix: bool
    seconds: float
    receipts: int
    tokens: int  # output tokens of the final attempts (forced tokens included)
    valid: int
    passes: list[Pass] = field(default_factory=list)

    @property
    def receipts_per_second(self) -> float:
        return self.receipts / self.seconds

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds

    def seconds_of(self, prefill: bool) -> float:
        return sum(p.seconds for p in self.passes if p.prefill == prefill)

    def prefill_tokens(self) -> int:
        return sum(p.rows * p.width for p in self.passes if p.prefill)

    @property
    def host_seconds(self) -> float:
        return self.seconds - self.seconds_of(True) - self.seconds_of(False)


def time_formcast(
    extractor: formcast.Extractor,
    timed: TimedModel,
    texts: list[str],
    batch_size: int,
    batching: str,
    share_prefix: bool,
    **options: Any,
) -> Run:
    timed.passes = []
    started = time.perf_counter()
    results = list(
        extractor.extract_many(
            Receipt,
            texts,
            batch_size=batch_size,
            batching=batching,  # type: ignore[arg-type]
            progress=False,
            share_prefix=share_prefix,
            **options,
        )
    )
    seconds = time.perf_counter() - started
    tokens = sum(r.completion_tokens for r in results)
    valid = sum(r.ok for r in results)
    return Run(batch_size, batching, share_prefix, seconds, len(texts), tokens, valid, timed.passes)


def prompts_of(extractor: formcast.Extractor, texts: list[str]) -> list[list[int]]:
    """The token ids of formcast's prompts for ``Receipt`` (what ``extract_many`` feeds)."""
    schema = output_spec(Receipt).json_schema
    template = extractor.prompt_template
    return [
        extractor._encode(  # the extractor's own chat-template encoding
            template.render(text=text, schema=schema, instructions=DEFAULT_INSTRUCTIONS)
        )
        for text in texts
    ]


def time_free(
    model: Any,
    prompts: list[list[int]],
    eos: list[int],
    batch_size: int,
    max_new_tokens: int,
    static_cache: bool = False,
) -> tuple[float, int]:
    """Seconds and output tokens (up to the first EOS) of unconstrained greedy decoding
    with transformers ``generate``, left-padded batches of ``batch_size`` prompts."""
    device = next(model.parameters()).device
    extra: dict[str, Any] = {"cache_implementation": "static"} if static_cache else {}
    seconds, tokens = 0.0, 0
    for start in range(0, len(prompts), batch_size):
        batch = prompts[start : start + batch_size]
        width = max(len(p) for p in batch)
        ids = torch.tensor([[eos[0]] * (width - len(p)) + p for p in batch], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch], device=device)
        _synchronise()
        started = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=eos,
                pad_token_id=eos[0],
                **extra,
            )
        _synchronise()
        seconds += time.perf_counter() - started
        for row in out[:, width:].tolist():
            tokens += next((i for i, t in enumerate(row) if t in eos), len(row))
    return seconds, tokens


# -- suite "batching" -----------------------------------------------------------------------


def batching_suite(args: argparse.Namespace, texts: list[str]) -> None:
    base = formcast.get_default_extractor()
    prompts = prompts_of(base, texts)
    timed = TimedModel(base.model, min(len(p) for p in prompts))
    extractor = formcast.Extractor(
        timed, base.tokenizer, max_new_tokens=args.max_new_tokens, compile=args.compile
    )
    # Warm-up: the constraint compiled and the prefix KV computed, as in a long-lived process.
    extractor.run(Receipt, texts[0])
    print(
        f"{'batch':>5}  {'batching':<10} {'prefix':<6} {'receipts/s':>10} {'vs b=1':>7} "
        f"{'vs b=1 no prefix':>16} {'tok/s':>6} {'valid':>6} {'prefill s':>9} "
        f"{'decode s':>8} {'host s':>7}"
    )
    runs: list[Run] = []
    base_runs: dict[bool, Run] = {}
    for batch_size in args.batch_sizes:
        for batching in ["continuous"] if batch_size == 1 else ["static", "continuous"]:
            for share_prefix in (False, True):
                run = time_formcast(extractor, timed, texts, batch_size, batching, share_prefix)
                runs.append(run)
                if batch_size == 1:
                    base_runs[share_prefix] = run
                print(_row(run, base_runs), flush=True)
                if args.profile:
                    print(_profile(run), flush=True)
    _print_saved_prefill(runs)
    if not args.no_free:
        eos = sorted(base.vocabulary.eos_token_ids)
        print("\noutput tokens/s, formcast (continuous, shared prefix) against free decoding:")
        for batch_size in args.batch_sizes:
            some = prompts[: max(args.free_count, batch_size)]
            seconds, tokens = time_free(base.model, some, eos, batch_size, args.max_new_tokens)
            ours = _find(runs, batch_size, "continuous", True)
            print(_against_free(batch_size, ours.tokens_per_second, tokens, seconds), flush=True)


def _find(runs: list[Run], batch_size: int, batching: str, share_prefix: bool) -> Run:
    if batch_size == 1:
        batching = "continuous"
    return next(
        r
        for r in runs
        if (r.batch_size, r.batching, r.share_prefix) == (batch_size, batching, share_prefix)
    )


def _row(run: Run, base: dict[bool, Run]) -> str:
    def ratio(reference: Run | None) -> str:
        if reference is None:
            return "-"
        return f"{run.receipts_per_second / reference.receipts_per_second:.2f}x"

    batching = "-" if run.batch_size == 1 else run.batching
    return (
        f"{run.batch_size:>5}  {batching:<10} {'on' if run.share_prefix else 'off':<6} "
        f"{run.receipts_per_second:>10.3f} {ratio(base.get(run.share_prefix)):>7} "
        f"{ratio(base.get(False)):>16} {run.tokens_per_second:>6.1f} "
        f"{run.valid:>3}/{run.receipts:<2} {run.seconds_of(True):>9.1f} "
        f"{run.seconds_of(False):>8.1f} {run.host_seconds:>7.1f}"
    )


def _profile(run: Run) -> str:
    """Per-pass detail of one run: passes, rows per pass, padding, time per pass."""
    decode = [p for p in run.passes if not p.prefill]
    prefill = [p for p in run.passes if p.prefill]
    rows = sum(p.rows for p in decode) / max(1, len(decode))
    multi = sum(1 for p in decode if p.width > 1)
    decode_s = run.seconds_of(False)
    return (
        f"        {len(prefill)} prefill passes ({run.prefill_tokens()} tokens), "
        f"{len(decode)} decoding passes ({rows:.1f} rows each, {multi} feeding forced "
        f"tokens), {1000 * decode_s / max(1, len(decode)):.0f} ms each; host "
        f"{run.host_seconds / run.seconds:.0%} of the run"
    )


def _print_saved_prefill(runs: list[Run]) -> None:
    print("\nprefill saved by the shared prefix (tokens fed, padding included; seconds):")
    for run in runs:
        if run.share_prefix:
            continue
        shared = _find(runs, run.batch_size, run.batching, True)
        tokens = run.prefill_tokens() - shared.prefill_tokens()
        seconds = run.seconds_of(True) - shared.seconds_of(True)
        batching = "-" if run.batch_size == 1 else run.batching
        print(
            f"batch {run.batch_size:>2} {batching:<10}: {run.prefill_tokens():>6} -> "
            f"{shared.prefill_tokens():>6} tokens ({tokens} saved, "
            f"{tokens / max(1, run.prefill_tokens()):.0%}), {run.seconds_of(True):6.1f} -> "
            f"{shared.seconds_of(True):6.1f} s ({seconds:.1f} s saved)"
        )


def _against_free(batch_size: int, ours: float, free_tokens: int, free_seconds: float) -> str:
    free = free_tokens / free_seconds
    return (
        f"batch {batch_size:>2}: free {free:7.1f} tok/s ({free_tokens} tokens), "
        f"formcast {ours:7.1f} tok/s, formcast/free {ours / free:.2f}x"
    )


# -- suite "models" -------------------------------------------------------------------------


def random_llama(vocab_size: int, device: str, dtype: torch.dtype) -> Any:
    """A randomly initialised Llama of about 1.1B parameters (the shape of a 1B Llama 3:
    16 layers, width 2048, 32 heads with 8 key-value heads), the given vocabulary."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=2048,
        intermediate_size=8192,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    return model.eval()


def _extract_all(
    extractor: formcast.Extractor, texts: list[str], batch_size: int, options: dict[str, Any]
) -> tuple[float, int]:
    """Seconds and output tokens of one ``extract_many`` over ``texts``."""
    started = time.perf_counter()
    results = list(
        extractor.extract_many(Receipt, texts, batch_size=batch_size, progress=False, **options)
    )
    return time.perf_counter() - started, sum(r.completion_tokens for r in results)


def models_suite(args: argparse.Namespace, texts: list[str]) -> None:
    default = formcast.get_default_extractor()
    tokenizer = default.tokenizer
    dtype = getattr(torch, args.dtype)
    makers: dict[str, Callable[[], Any]] = {
        "default": lambda: default.model.to(args.device, dtype),
        "random-1.1b": lambda: random_llama(len(tokenizer), args.device, dtype),
    }
    eos = sorted(default.vocabulary.eos_token_ids)
    for name in args.models:
        model = makers[name]()
        params = sum(p.numel() for p in model.parameters())
        extractor = formcast.Extractor(
            model, tokenizer, max_new_tokens=args.max_new_tokens, compile=args.compile
        )
        prompts = prompts_of(extractor, texts)
        options: dict[str, Any] = {"max_attempts": 1}
        print(f"\n{name}: {params / 1e9:.2f}B parameters, {args.device}, {args.dtype}")
        for batch_size in args.batch_sizes:
            # Warm-up: the constraint, the prefix and (compile=True) the graph of this
            # batch size (the slot cache has batch_size slots whatever the texts).
            warm_up = _extract_all(extractor, texts[:1], batch_size, options)[0]
            seconds, tokens = _extract_all(extractor, texts, batch_size, options)
            line = f"batch {batch_size:>2}: formcast {tokens / seconds:7.1f} tok/s"
            if not args.no_free:
                free_seconds, free_tokens = time_free(
                    model,
                    prompts[: max(args.free_count, batch_size)],
                    eos,
                    batch_size,
                    args.max_new_tokens,
                    static_cache=args.compile,
                )
                line = _against_free(batch_size, tokens / seconds, free_tokens, free_seconds)
            print(f"{line} (warm-up {warm_up:.1f} s)", flush=True)
        del model, extractor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=["batching", "models"], default="batching")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=16)
    parser.add_argument("--batch-sizes", type=int, nargs="+")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--no-free", action="store_true", help="skip free decoding")
    parser.add_argument(
        "--free-count",
        type=int,
        help="free decoding over the first max(this, batch size) receipts only (default: "
        "all); it runs to the budget, so fewer receipts give its tokens/s sooner",
    )
    parser.add_argument("--profile", action="store_true", help="per-pass detail of each run")
    parser.add_argument("--compile", action="store_true", help="Extractor(compile=True)")
    parser.add_argument("--device", default="cpu", help="models suite: cpu or cuda")
    parser.add_argument("--dtype", default="float32", help="models suite: float32, bfloat16")
    parser.add_argument(
        "--models",
        nargs="+",
        choices=["default", "random-1.1b"],
        default=["default", "random-1.1b"],
    )
    args = parser.parse_args()
    if args.free_count is None:
        args.free_count = args.count
    if args.batch_sizes is None:
        args.batch_sizes = [1, 4, 8, 16] if args.suite == "batching" else [1, 8, 32]
    torch.set_num_threads(args.threads)
    texts = [text for text, _ in load_receipts(args.start, args.count)]
    print(
        f"{len(texts)} receipts {args.start:03d}-{args.start + args.count - 1:03d}, "
        f"max_new_tokens={args.max_new_tokens}, {torch.get_num_threads()} threads, "
        f"compile={args.compile}, load average {os.getloadavg()[0]:.1f} at the start"
    )
    if args.suite == "batching":
        batching_suite(args, texts)
    else:
        models_suite(args, texts)
    print(f"\nload average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
