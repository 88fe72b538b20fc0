/*
 * rover-gpuinfo: print this host's GPUs as the CUDA runtime sees them, in
 * the line format of common/gpu.h, and exit 0 (also when there is none).
 *
 * Run by rv_gpu_probe() so that no daemon loads the CUDA runtime itself.
 * Built against the CUDA runtime when the toolkit is found at build time
 * (RV_HAVE_CUDA); otherwise it says "built without CUDA".  Only the runtime
 * API is used (libcudart), never the driver API.
 */
#include <stdio.h>
#include <string.h>

#ifdef RV_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static void usage(void)
{
	printf("usage: rover-gpuinfo\n"
	       "Print the GPUs the CUDA runtime sees, one line each:\n"
	       "  count N\n"
	       "  gpu INDEX TOTAL_MB FREE_MB CC_MAJOR CC_MINOR NAME\n"
	       "  why TEXT      (when there is none)\n"
	       "Exits 0 also when there is no GPU; CUDA_VISIBLE_DEVICES is honoured.\n");
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		usage();
		return strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ? 0 : 2;
	}
#ifdef RV_HAVE_CUDA
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n <= 0) {
		printf("count 0\nwhy %s\n", e != cudaSuccess ? cudaGetErrorString(e) : "no GPU");
		return 0;
	}
	printf("count %d\n", n);
	for (int i = 0; i < n; i++) {
		struct cudaDeviceProp p;
		size_t free_b = 0, total_b = 0;
		memset(&p, 0, sizeof(p));
		if (cudaGetDeviceProperties(&p, i) != cudaSuccess)
			snprintf(p.name, sizeof(p.name), "unknown");
		if (cudaSetDevice(i) == cudaSuccess &&
		    cudaMemGetInfo(&free_b, &total_b) != cudaSuccess)
			free_b = 0;
		if (total_b == 0)
			total_b = p.totalGlobalMem;
		for (char *c = p.name; *c; c++)
			if (*c == '\n' || *c == '\r')
				*c = ' ';
		printf("gpu %d %zu %zu %d %d %s\n", i, total_b >> 20, free_b >> 20, p.major,
		       p.minor, p.name);
	}
#else
	printf("count 0\nwhy built without CUDA\n");
#endif
	return 0;
}
