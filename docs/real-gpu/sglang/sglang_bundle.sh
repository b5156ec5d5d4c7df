#!/usr/bin/env bash
# Here (no GPU): download SGLang 0.5.17 (the newest release that pins torch==2.11.0, the GPU machine's torch), its
# kernel wheel sglang-kernel 0.4.5 (a CUDA 13 build: libcudart.so.13, libcublas.so.13) and the packages the machine
# lacks (sglang-0.5.17-deps.txt); trim the kernel wheel to what one H200 needs for a dense model served with
# Triton attention; pack everything into chunks of at most CHUNK_MIB MiB (default 48) under DEST (default .sw in
# the current repo, which must be git-ignored). Each chunk travels in one device call (carry: [".sw/cN"]) with
# the project tree, and the two together must stay under the carry's 64 MiB: with the tree at 11 MiB (2026-12-02),
# 54 MiB chunks no longer fit. Prints the chunk count (3 at 48 MiB: 151 MB in all); see README.md here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DEST=${1:-.sw}
LIMIT=$((${CHUNK_MIB:-48} * 1024 * 1024))
work=$(mktemp -d)
P="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
 --platform manylinux2014_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_34_x86_64
 --platform manylinux_2_24_x86_64 --platform manylinux_2_35_x86_64 --platform manylinux_2_5_x86_64 --platform any"
python3 -m pip download -q --no-deps $P -d "$work/w" -r "$here/sglang-0.5.17-deps.txt" sglang==0.5.17 sglang-kernel==0.4.5
k=$(ls "$work"/w/sglang_kernel-0.4.5-*.whl)
# Not needed on one Hopper GPU for a dense model served with --attention-backend triton: FlashAttention 3
# (flash_ops.abi3.so, 342 of the wheel's 383 MB; sgl_kernel imports it only in sgl_kernel.flash_attn, which
# SGLang imports only for the fa3 backends), the Blackwell build of common_ops, and InfLLM-V2's extension
# (built for CPython 3.10, loaded lazily).
zip -q -d "$k" 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/sm100/*' 'sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so'
rm -rf "$DEST"; mkdir -p "$DEST"
cp "$here/sglang_setup.sh" "$work/w/"
# first fit, largest first
n=0
for f in $(ls -S "$work"/w/*); do
  s=$(stat -c %s "$f"); placed=
  for ((i = 1; i <= n; i++)); do
    used=$(du -cb "$DEST/c$i" | tail -1 | cut -f1)
    if ((used + s <= LIMIT)); then mv "$f" "$DEST/c$i/"; placed=1; break; fi
  done
  if [ -z "$placed" ]; then
    ((s <= LIMIT)) || { echo "$(basename "$f") is over ${CHUNK_MIB:-48} MiB by itself"; exit 1; }
    n=$((n + 1)); mkdir -p "$DEST/c$n"; mv "$f" "$DEST/c$n/"
  fi
done
du -sh "$DEST"/*
echo "$n chunks"
rm -rf "$work"
