/* Do virtual memory calls stall kernels that stream memory? A chain of 20 fill kernels over a
 * 1 GiB buffer, plain and with one call between each pair on an 8 MiB handle no kernel touches;
 * the difference per call is what the call costs the device (or the host, if it waits). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define CK(x) do{CUresult r_=(x); if(r_!=CUDA_SUCCESS){const char*s;cuGetErrorString(r_,&s);printf("FAIL %s: %s\n",#x,s);exit(1);}}while(0)
__global__ void fill(unsigned *p, size_t n, unsigned v){ for(size_t i=blockIdx.x*(size_t)blockDim.x+threadIdx.x;i<n;i+=(size_t)gridDim.x*blockDim.x) p[i]=v+(unsigned)i; }
enum {CHAIN=20, REPS=15, NOPS=6};
static const char *names[NOPS]={"none","cuMemCreate","cuMemMap","cuMemSetAccess","cuMemUnmap","cuMemRelease"};
static CUmemAllocationProp prop; static CUmemAccessDesc acc; static size_t hb; static CUdeviceptr va; static CUmemGenericAllocationHandle h[CHAIN];
static void op(int k,int i){ CUdeviceptr at=va+(CUdeviceptr)i*hb;
  switch(k){case 1:CK(cuMemCreate(&h[i],hb,&prop,0));break;case 2:CK(cuMemMap(at,hb,0,h[i],0));break;case 3:CK(cuMemSetAccess(at,hb,&acc,1));break;
  case 4:CK(cuMemUnmap(at,hb));break;case 5:CK(cuMemRelease(h[i]));break;default:break;} }
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return (x>y)-(x<y);}
int main(void){
  cudaSetDevice(0); cudaFree(0); CK(cuInit(0));
  prop.type=CU_MEM_ALLOCATION_TYPE_PINNED; prop.location.type=CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id=0;
  acc.location=prop.location; acc.flags=CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  size_t g; CK(cuMemGetAllocationGranularity(&g,&prop,CU_MEM_ALLOC_GRANULARITY_MINIMUM)); hb=4*g;
  CK(cuMemAddressReserve(&va,CHAIN*hb,0,0,0));
  size_t n=(1ull<<30)/4; unsigned *buf; cudaMalloc(&buf,n*4); cudaStream_t s; cudaStreamCreateWithFlags(&s,cudaStreamNonBlocking);
  fill<<<1024,512,0,s>>>(buf,n,1); cudaStreamSynchronize(s);
  double t[NOPS][REPS], base[REPS];
  for(int r=0;r<REPS;r++){
    for(int k=0;k<NOPS;k++){ /* k = 0: plain; then create, map, access, unmap, release: each leaves the next one's state */
      cudaStreamSynchronize(s); double t0=now();
      for(int i=0;i<CHAIN;i++){ fill<<<1024,512,0,s>>>(buf,n,i); op(k,i); }
      cudaStreamSynchronize(s); t[k][r]=now()-t0;
    }
    base[r]=t[0][r];
  }
  qsort(base,REPS,sizeof(double),cmp);
  printf("chain of %d fills of 1 GiB: median %.3f ms (%.3f-%.3f)\n",CHAIN,base[REPS/2]*1e3,base[0]*1e3,base[REPS-1]*1e3);
  for(int k=1;k<NOPS;k++){ double d[REPS]; for(int r=0;r<REPS;r++) d[r]=(t[k][r]-t[0][r])/CHAIN; qsort(d,REPS,sizeof(double),cmp);
    printf("%-15s between fills: %+.1f us a call (median of %d; %+.1f to %+.1f)\n",names[k],d[REPS/2]*1e6,REPS,d[0]*1e6,d[REPS-1]*1e6); }
  return 0;
}
