# Sourced by the tools/gpu and bench/train_gpu scripts on the GPU machine: unpacks build/gpu-carry.tgz
# (tools/gpu/pack.sh) to /tmp/g once and puts its libraries and the machine's cuBLASLt on LD_LIBRARY_PATH.
mkdir -p /tmp/g
[ -d /tmp/g/bin ] || tar xzf build/gpu-carry.tgz -C /tmp/g
lt=$(find /usr/local/cuda*/targets /usr/local/cuda*/lib64 /opt /usr/lib -name 'libcublasLt.so.13*' 2>/dev/null |
  head -1)
export LD_LIBRARY_PATH=/tmp/g/lib:$(dirname "${lt:-/usr/local/cuda/lib64/x}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
