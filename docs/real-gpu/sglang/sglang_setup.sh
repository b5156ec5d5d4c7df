#!/usr/bin/env bash
# There (on the GPU machine), from the project's root, after the chunks were carried and copied into one folder
# (README.md here): install SGLang 0.5.17, its trimmed kernel wheel and the missing packages into /tmp/ssite
# (--no-deps, against the image's torch 2.11.0+cu130), make /tmp/sv/bin/python see /tmp/ssite and the project,
# build a random 1B Llama in /tmp/m if there is none, and import SGLang's serving path once (fails fast, with the
# missing module's name, before a server is launched).
set -euo pipefail
W=${W:-/tmp/sw}          # where the carried chunks were copied
PROJ=${PROJ:-$PWD}       # the project's checkout on that machine
PY=$(command -v python3)
# sglang 0.5.17's wheel is manylinux_2_34: pip refuses it on an older glibc
$PY -c 'import platform, sys; v = platform.libc_ver()[1]; print("glibc", v); sys.exit(tuple(map(int, v.split("."))) < (2, 34))' \
  || { echo "glibc < 2.34: the sglang 0.5.17 wheel cannot be installed here"; exit 1; }
$PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda); assert torch.__version__.startswith("2.11.0")'
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/ssite $W/*.whl 2>&1 | grep -v 'already exists' | tail -3 || true
mkdir -p /tmp/sv/bin
cat > /tmp/sv/bin/python <<EOT
#!/bin/bash
export PYTHONPATH=/tmp/ssite:$PROJ\${PYTHONPATH:+:\$PYTHONPATH}
exec $PY "\$@"
EOT
chmod +x /tmp/sv/bin/python
[ -d /tmp/m ] || /tmp/sv/bin/python -m toolkit.testbeds.tiny_model build /tmp/m --vocab-size 4096 --hidden-size 2048 \
   --layers 16 --heads 16 --dtype bfloat16 --device cuda
/tmp/sv/bin/python - <<'EOT'
import importlib, time
t = time.time()
import sgl_kernel  # loads sm90/common_ops (CUDA 13) on the GPU
for m in ("sglang.srt.entrypoints.http_server", "sglang.srt.managers.scheduler", "sglang.srt.managers.detokenizer_manager",
          "sglang.srt.model_executor.model_runner", "sglang.srt.models.llama", "sglang.srt.layers.attention.triton_backend"):
    importlib.import_module(m)
import sglang
print("sglang", sglang.__version__, "sgl_kernel", sgl_kernel.__version__, f"imports {time.time() - t:.0f} s")
EOT
