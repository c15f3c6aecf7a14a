"""Decoding speed against the hardware: formcast, transformers ``generate`` and a plain
greedy loop with a static cache (and CUDA graphs on a GPU), per model and batch size.

For each model (``default``: SmolLM2-135M-Instruct; ``random-1.1b``: a randomly
initialised Llama of about 1.1B parameters, built from a config) and each batch size, on
formcast's own prompts for SROIE receipts (cycled when a batch wants more), it prints
output tokens/s, milliseconds per decoding pass and the ratio against the reference:

* ``reference``: unconstrained greedy decoding of the same prompts, ``--steps`` tokens per
  row, the KV cache in fixed buffers, each pass fed an explicit 4-D attention bias, and
  on a GPU every one-token pass replayed from a captured CUDA graph. This is the speed of
  the hardware for the model and the baseline of every ratio. Its tokens/s include the
  prefill (16 rows a pass), as formcast's do; its ms/pass is the decoding passes alone,
  every row busy at every pass;
* ``generate``: transformers ``generate``, greedy, left-padded, ``--steps`` new tokens
  (``min_new_tokens`` too, so that every row decodes as many passes), prefill included;
* ``formcast Receipt`` and ``formcast FromText``: ``extract_many`` of ``sroie.Receipt``
  and ``sroie.ShapedReceipt`` over ``--batches`` batches of texts (continuous batching
  keeps the slots full until the last texts), one attempt per text, the extractor's
  defaults (graphs on CUDA). Its time is the whole call: prefills (in chunks, between
  decoding passes), the constraint's host work, and the last rows finishing in passes
  with free slots. ms/pass is that time over the decoding passes run (with fixed slots;
  without them, over the output tokens of a row, several forced tokens going in one
  pass, so a pass takes at least that long).

It also prints formcast's first call for each class and batch size: the constraint's
compile, the shared prompt prefix, and on a GPU the capture of the graphs.

    python benchmarks/gpu.py --device cuda                      # bf16, batches 1 32 256
    python benchmarks/gpu.py --device cpu --batch-sizes 1 4     # float32, the CPU check
    python benchmarks/gpu.py --device cuda --join-share 0       # rows join one by one

On the CPU the reference is the same loop without graphs; formcast should stay at or
above 0.9x of it (the check that its host work stays hidden or small).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from sroie import Receipt, ShapedReceipt, load_receipts  # the script's folder is on sys.path
from throughput import prompts_of, random_llama
from transformers.cache_utils import Cache

import formcast
from formcast.decode.forward import cache_keyword
from formcast.decode.slotcache import SlotLayer, kv_shape
from formcast.extraction import extractor as extractor_module


def _synchronise() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


# -- the reference: a plain greedy loop over fixed buffers --------------------------------


def _fixed_cache(model: Any, rows: int, width: int) -> list[SlotLayer]:
    """Zeroed KV buffers of ``rows`` rows and ``width`` columns per layer, written at the
    columns each layer's ``columns`` tensor holds (formcast's slot layer, used plainly)."""
    layers, heads, head_dim = kv_shape(model.config)
    parameter = next(model.parameters())
    shape = (rows, heads, width, head_dim)
    column = torch.zeros(1, dtype=torch.long, device=parameter.device)
    return [
        SlotLayer(parameter.new_zeros(shape), parameter.new_zeros(shape), column)
        for _ in range(layers)
    ]


def _views(layers: list[SlotLayer], start: int, stop: int, columns: torch.Tensor) -> Any:
    """A cache over rows ``start:stop`` of the buffers (views: writes land in them)."""
    rows = [
        SlotLayer(layer.buffers[0][start:stop], layer.buffers[1][start:stop], columns)
        for layer in layers
    ]
    return Cache(layers=rows)


@dataclass
class Timing:
    seconds: float
    tokens: int
    passes: int
    first_call: float = 0.0
    decode_seconds: float | None = None  # the decoding passes alone, where told apart

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds

    @property
    def ms_per_pass(self) -> float:
        seconds = self.seconds if self.decode_seconds is None else self.decode_seconds
        return 1e3 * seconds / max(self.passes, 1)


def reference(model: Any, prompts: list[list[int]], steps: int, graphs: bool) -> Timing:
    """Greedy decoding of ``steps`` tokens per prompt over fixed buffers; prompts are
    prefilled 16 rows at a time, then every row decodes one token per pass."""
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    keyword = cache_keyword(model)
    _synchronise()
    prefill_started = time.perf_counter()
    rows, longest = len(prompts), max(len(p) for p in prompts)
    width = 256
    while width < longest + steps + 1:
        width *= 2
    layers = _fixed_cache(model, rows, width)
    hidden = torch.finfo(dtype).min
    visible = torch.zeros((rows, width), dtype=torch.bool, device=device)
    first = torch.zeros((rows, 1), dtype=torch.long, device=device)
    for start in range(0, rows, 16):
        part = prompts[start : start + 16]
        ids = torch.zeros((len(part), longest), dtype=torch.long)
        positions = torch.zeros((len(part), longest), dtype=torch.long)
        for i, prompt in enumerate(part):
            ids[i, longest - len(prompt) :] = torch.tensor(prompt)
            positions[i, longest - len(prompt) :] = torch.arange(len(prompt))
            visible[start + i, longest - len(prompt) : longest] = True
        causal = torch.ones((longest, width), dtype=torch.bool, device=device).tril()
        seen = visible[start : start + len(part), None, None, :] & causal[None, None]
        bias = torch.zeros(seen.shape, dtype=dtype, device=device).masked_fill(~seen, hidden)
        cache = _views(layers, start, start + len(part), torch.arange(longest, device=device))
        with torch.inference_mode():
            out = model(
                input_ids=ids.to(device),
                position_ids=positions.to(device),
                attention_mask=bias,
                **{keyword: cache},
                use_cache=True,
                logits_to_keep=1,
            )
        first[start : start + len(part)] = out.logits[:, -1].argmax(-1, keepdim=True)
    _synchronise()
    prefill = time.perf_counter() - prefill_started
    ids = first
    positions = torch.tensor([[len(p)] for p in prompts], device=device)
    column = torch.tensor([longest], device=device)
    bias = torch.zeros((rows, 1, 1, width), dtype=dtype, device=device)
    cache = Cache(layers=layers)
    for layer in layers:
        layer.columns = column

    def one_pass() -> torch.Tensor:
        bias.copy_(torch.where(visible, 0.0, hidden).to(dtype)[:, None, None, :])
        out = model(
            input_ids=ids,
            position_ids=positions,
            attention_mask=bias,
            **{keyword: cache},
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits[:, -1]

    replay: Callable[[], torch.Tensor] = one_pass
    with torch.inference_mode():
        if graphs:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                one_pass()  # warm-up outside the graph (kernel choice, workspace)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                captured = one_pass()

            def replay() -> torch.Tensor:
                graph.replay()
                return captured

        _synchronise()
        started = time.perf_counter()
        for step in range(steps):
            visible[:, longest + step] = True
            column.fill_(longest + step)
            chosen = replay().argmax(-1, keepdim=True)
            ids.copy_(chosen)
            positions.add_(1)
            chosen.cpu()  # one read per pass, as a sampler needs
        _synchronise()
    decoding = time.perf_counter() - started
    return Timing(prefill + decoding, rows * steps, steps, decode_seconds=decoding)


def generate(model: Any, prompts: list[list[int]], pad: int, steps: int) -> Timing:
    """transformers ``generate``, greedy, exactly ``steps`` new tokens per row."""
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    _synchronise()
    started = time.perf_counter()
    with torch.inference_mode():
        model.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=steps,
            min_new_tokens=steps,
            do_sample=False,
            pad_token_id=pad,
        )
    _synchronise()
    return Timing(time.perf_counter() - started, len(prompts) * steps, steps)


def run_formcast(
    extractor: formcast.Extractor, output: Any, texts: list[str], batch_size: int
) -> Timing:
    """``extract_many`` of ``texts`` (the first call, on four texts, is timed apart). With
    fixed slots, ms/pass is the run's time over its decoding passes; without, over the
    output tokens of a row."""
    started = time.perf_counter()
    list(
        extractor.extract_many(
            output, texts[:4], batch_size=batch_size, progress=False, max_attempts=1
        )
    )
    _synchronise()
    first_call = time.perf_counter() - started
    engine = extractor._slot_engine()  # private: the passes it ran
    passes_before = engine.passes if engine is not None else 0
    started = time.perf_counter()
    results = list(
        extractor.extract_many(output, texts, batch_size=batch_size, progress=False, max_attempts=1)
    )
    _synchronise()
    seconds = time.perf_counter() - started
    tokens = sum(r.completion_tokens for r in results)
    if engine is not None:
        passes = engine.passes - passes_before
    else:
        passes = max(1, round(tokens / batch_size))
    return Timing(seconds, tokens, passes, first_call)


def check_outputs(model: Any, tokenizer: Any, texts: list[str], batch_size: int) -> str:
    """The greedy outputs of the default path (graphs on CUDA) against eager passes over
    a growing cache (``compile=False``), the same model and texts: how many are the same."""
    outputs = []
    for option in (None, False):
        extractor = formcast.Extractor(model, tokenizer, max_new_tokens=200, compile=option)
        for output in (Receipt, ShapedReceipt):
            results = extractor.extract_many(
                output, texts, batch_size=batch_size, progress=False, max_attempts=1
            )
            outputs.append([r.raw_text for r in results])
    same = sum(a == b for n in (0, 1) for a, b in zip(outputs[n], outputs[n + 2], strict=True))
    return f"{same} of {2 * len(texts)} greedy outputs the same as eager (Receipt, FromText)"


def _line(name: str, timing: Timing, base: Timing | None) -> str:
    ratio = f"{timing.tokens_per_second / base.tokens_per_second:5.2f}x" if base else "    -"
    first = f"  first call {timing.first_call:5.1f} s" if timing.first_call else ""
    return (
        f"  {name:<18} {timing.tokens_per_second:9.0f} tok/s  {timing.ms_per_pass:7.2f} ms/pass"
        f"  {ratio}{first}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", help="default: bfloat16 on cuda, float32 on cpu")
    parser.add_argument("--models", nargs="+", default=["default", "random-1.1b"])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 256])
    parser.add_argument("--steps", type=int, default=64, help="reference/generate tokens")
    parser.add_argument(
        "--batches",
        type=int,
        default=2,
        help="formcast: texts per run = this many batches (at least 4 texts)",
    )
    parser.add_argument("--max-texts", type=int, default=512, help="formcast: at most")
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2, help="torch threads on the CPU")
    parser.add_argument("--no-generate", action="store_true")
    parser.add_argument(
        "--check",
        type=int,
        default=16,
        help="first compare this many greedy outputs with eager ones, in float32 (0: no)",
    )
    parser.add_argument(
        "--join-share",
        type=int,
        help="with fixed slots, rows join in groups of batch/N (formcast's JOIN_SHARE; "
        "0: each row at once), to compare prefill grouping",
    )
    args = parser.parse_args()
    if args.join_share is not None:
        extractor_module.JOIN_SHARE = args.join_share or 1 << 30
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype or ("bfloat16" if args.device != "cpu" else "float32"))
    graphs = args.device.startswith("cuda")
    default = formcast.get_default_extractor()
    tokenizer = default.tokenizer
    pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
    receipts = [text for text, _ in load_receipts(0, 200)]
    if args.check:
        check_model = default.model.to(args.device, torch.float32)
        print("float32, batch 8:", check_outputs(check_model, tokenizer, receipts[: args.check], 8))
    print(
        f"device {args.device} ({torch.cuda.get_device_name() if graphs else 'cpu'}), "
        f"{dtype}, torch {torch.__version__}"
    )
    for name in args.models:
        if name == "default":
            model = default.model.to(args.device, dtype)
        else:
            model = random_llama(len(tokenizer), args.device, dtype)
        params = sum(p.numel() for p in model.parameters())
        extractor = formcast.Extractor(model, tokenizer, max_new_tokens=args.max_new_tokens)
        print(f"\n{name}: {params / 1e9:.2f}B parameters")
        for batch_size in args.batch_sizes:
            count = min(max(4, batch_size * args.batches), args.max_texts)
            texts = (receipts * (1 + count // len(receipts)))[:count]
            prompts = prompts_of(extractor, texts[:batch_size])
            reference(model, prompts, 4, graphs)  # warm-up
            base = reference(model, prompts, args.steps, graphs)
            print(f"batch {batch_size} ({count} texts for formcast)", flush=True)
            print(_line("reference", base, None), flush=True)
            if not args.no_generate:
                generate(model, prompts, pad, 4)
                print(
                    _line("generate", generate(model, prompts, pad, args.steps), base), flush=True
                )
            for label, output in (
                ("formcast Receipt", Receipt),
                ("formcast FromText", ShapedReceipt),
            ):
                print(
                    _line(label, run_formcast(extractor, output, texts, batch_size), base),
                    flush=True,
                )
            engine = extractor._slot_engine()  # what ran: graphs, or why not
            if engine is not None:
                print(
                    f"  ({engine.mode}: {engine.captures} graphs captured in "
                    f"{engine.capture_seconds:.1f} s, fallback: {engine.fallback})",
                    flush=True,
                )
            if graphs:
                torch.cuda.empty_cache()
        del model, extractor
        if graphs:
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
