// Raw host cost of a kernel launch and of a CUDA graph launch, no Python in the way.
// Built and run by scripts/gpu/measure_host.py (nvcc -O2); prints one JSON object.
// Method: a spin kernel keeps the GPU busy for longer than the host loop takes, so the
// host-side time of N back-to-back launches (steady_clock around the loop) is the host's
// issue cost alone; GPU time of a graph replay is taken with CUDA events without the spin.
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <vector>
#include <algorithm>

__global__ void empty_kernel() {}
__global__ void tiny_add(float *x) { x[threadIdx.x] += 1.0f; }
__global__ void spin(long long cycles) {
  long long s = clock64();
  while (clock64() - s < cycles) {}
}

static double now_ns() {
  return std::chrono::duration<double, std::nano>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("{\"error\": \"%s line %d\"}\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

int main() {
  CK(cudaFree(0));
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *x;
  CK(cudaMalloc(&x, 1024 * sizeof(float)));
  const long long spin_cycles = 40LL * 1000 * 1000;  // ~20 ms at ~2 GHz
  const int N = 200, REPS = 25;
  // Warm-up.
  for (int i = 0; i < 100; i++) empty_kernel<<<1, 1, 0, st>>>();
  CK(cudaStreamSynchronize(st));
  std::vector<double> launch, launch_add;
  for (int r = 0; r < REPS; r++) {
    spin<<<1, 1, 0, st>>>(spin_cycles);
    double t0 = now_ns();
    for (int i = 0; i < N; i++) empty_kernel<<<1, 1, 0, st>>>();
    double t1 = now_ns();
    launch.push_back((t1 - t0) / N);
    CK(cudaStreamSynchronize(st));
    spin<<<1, 1, 0, st>>>(spin_cycles);
    t0 = now_ns();
    for (int i = 0; i < N; i++) tiny_add<<<1, 32, 0, st>>>(x);
    t1 = now_ns();
    launch_add.push_back((t1 - t0) / N);
    CK(cudaStreamSynchronize(st));
  }
  // GPU time per kernel back to back (no spin): the issue rate or the GPU, whichever is slower.
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> stream_gpu;
  for (int r = 0; r < REPS; r++) {
    spin<<<1, 1, 0, st>>>(spin_cycles / 4);  // let the launches queue up first
    CK(cudaEventRecord(e0, st));
    for (int i = 0; i < N; i++) tiny_add<<<1, 32, 0, st>>>(x);
    CK(cudaEventRecord(e1, st));
    CK(cudaStreamSynchronize(st));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    stream_gpu.push_back(ms * 1e6 / N);
  }
  printf("{\"launch_empty_ns\": %.1f, \"launch_tiny_add_ns\": %.1f, \"stream_gpu_per_kernel_ns\": %.1f, \"graphs\": [",
         median(launch), median(launch_add), median(stream_gpu));
  int ks[] = {1, 10, 100, 1000};
  for (int ki = 0; ki < 4; ki++) {
    int k = ks[ki];
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < k; i++) tiny_add<<<1, 32, 0, st>>>(x);
    CK(cudaStreamEndCapture(st, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphUpload(ge, st));
    for (int i = 0; i < 5; i++) CK(cudaGraphLaunch(ge, st));
    CK(cudaStreamSynchronize(st));
    const int NG = 20;
    std::vector<double> host, gpu;
    for (int r = 0; r < REPS; r++) {
      spin<<<1, 1, 0, st>>>(spin_cycles);
      double t0 = now_ns();
      for (int i = 0; i < NG; i++) cudaGraphLaunch(ge, st);
      double t1 = now_ns();
      host.push_back((t1 - t0) / NG);
      CK(cudaStreamSynchronize(st));
      spin<<<1, 1, 0, st>>>(spin_cycles / 8);
      CK(cudaEventRecord(e0, st));
      for (int i = 0; i < NG; i++) cudaGraphLaunch(ge, st);
      CK(cudaEventRecord(e1, st));
      CK(cudaStreamSynchronize(st));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      gpu.push_back(ms * 1e6 / NG);
    }
    printf("%s{\"kernels\": %d, \"host_ns\": %.1f, \"gpu_ns\": %.1f}", ki ? ", " : "", k, median(host), median(gpu));
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
  }
  printf("]}\n");
  return 0;
}
