/*
 * rover-gpuinfo: print this host's GPUs as the CUDA runtime sees them, in
 * the line format of common/gpu.h, and exit 0 (also when there is none).
 *
 * Run by rv_gpu_probe() so that no daemon loads the CUDA runtime itself.
 * Built against the CUDA runtime when the toolkit is found at build time
 * (RV_HAVE_CUDA); otherwise it says "built without CUDA".  Only the runtime
 * API is used (libcudart), never the driver API.
 *
 * Utilisation is not in the CUDA runtime: it comes from NVML, the driver's
 * management library, loaded at run time (dlopen of libnvidia-ml.so.1,
 * installed with the driver) so that the program builds and runs without
 * it.  A device is matched to NVML by its PCI bus id (NVML's order need not
 * be CUDA's, and CUDA_VISIBLE_DEVICES renumbers only CUDA's).  No NVML, or a
 * device it cannot read: no "util" line for it.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#ifdef RV_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#ifdef RV_HAVE_CUDA
/* The few NVML entry points used, as the driver's nvml.h declares them
 * (stable C ABI; NVML_SUCCESS is 0). */
struct nvml_util {
	unsigned int gpu;    /* percent of the last period a kernel ran */
	unsigned int memory; /* percent of it device memory was read or written */
};
struct nvml {
	void *lib;
	int (*init)(void);
	int (*shutdown)(void);
	int (*by_pci)(const char *bus_id, void **dev);
	int (*util)(void *dev, struct nvml_util *u);
};

/* 0 with the library open and initialised, else -1 (no NVML here). */
static int nvml_open(struct nvml *n)
{
	memset(n, 0, sizeof(*n));
	n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib)
		return -1;
	*(void **)&n->init = dlsym(n->lib, "nvmlInit_v2");
	*(void **)&n->shutdown = dlsym(n->lib, "nvmlShutdown");
	*(void **)&n->by_pci = dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2");
	*(void **)&n->util = dlsym(n->lib, "nvmlDeviceGetUtilizationRates");
	if (!n->init || !n->shutdown || !n->by_pci || !n->util || n->init() != 0) {
		dlclose(n->lib);
		n->lib = NULL;
		return -1;
	}
	return 0;
}

static void nvml_close(struct nvml *n)
{
	if (!n->lib)
		return;
	n->shutdown();
	dlclose(n->lib);
	n->lib = NULL;
}

/* "util INDEX GPU_PCT MEM_PCT" for the device at bus_id, when NVML reads it. */
static void print_util(struct nvml *n, int index, const char *bus_id)
{
	void *dev = NULL;
	struct nvml_util u = { 0, 0 };
	if (!n->lib || n->by_pci(bus_id, &dev) != 0 || n->util(dev, &u) != 0)
		return;
	if (u.gpu <= 100 && u.memory <= 100)
		printf("util %d %u %u\n", index, u.gpu, u.memory);
}
#endif

static void usage(void)
{
	printf("usage: rover-gpuinfo\n"
	       "Print the GPUs the CUDA runtime sees, one line each:\n"
	       "  count N\n"
	       "  gpu INDEX TOTAL_MB FREE_MB CC_MAJOR CC_MINOR NAME\n"
	       "  util INDEX GPU_PCT MEM_PCT   (when the driver's NVML reads it)\n"
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
	struct nvml nv;
	nvml_open(&nv);
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
		char bus[32];
		if (cudaDeviceGetPCIBusId(bus, sizeof(bus), i) == cudaSuccess)
			print_util(&nv, i, bus);
	}
	nvml_close(&nv);
#else
	printf("count 0\nwhy built without CUDA\n");
#endif
	return 0;
}
