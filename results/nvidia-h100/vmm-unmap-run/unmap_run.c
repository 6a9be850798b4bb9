/* Does one cuMemUnmap over several adjacent mappings (each its own handle) work, and what does it cost? */
#include <cuda.h>
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define CK(x) do{CUresult r_=(x); if(r_!=CUDA_SUCCESS){const char*s;cuGetErrorString(r_,&s);printf("FAIL %s: %s\n",#x,s);return 1;}}while(0)
int main(void){
  CUdevice d; CUcontext c; CK(cuInit(0)); CK(cuDeviceGet(&d,0)); CK(cuDevicePrimaryCtxRetain(&c,d)); CK(cuCtxSetCurrent(c));
  CUmemAllocationProp p={0}; p.type=CU_MEM_ALLOCATION_TYPE_PINNED; p.location.type=CU_MEM_LOCATION_TYPE_DEVICE; p.location.id=0;
  size_t g; CK(cuMemGetAllocationGranularity(&g,&p,CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  CUmemAccessDesc a={p.location,CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  enum {K=8, H=4, REPS=30};  /* K handles of H pages each */
  CUdeviceptr va; CK(cuMemAddressReserve(&va,K*H*g,0,0,0));
  double one[REPS], each[REPS];
  for(int rep=0;rep<REPS;rep++){
    for(int mode=0;mode<2;mode++){
      CUmemGenericAllocationHandle h[K];
      for(int i=0;i<K;i++){CK(cuMemCreate(&h[i],H*g,&p,0)); CK(cuMemMap(va+i*H*g,H*g,0,h[i],0));}
      CK(cuMemSetAccess(va,K*H*g,&a,1));
      CK(cuMemsetD32(va, 7u, K*H*g/4));
      CK(cuCtxSynchronize());
      double t0=now();
      if(mode==0){ CK(cuMemUnmap(va,K*H*g)); }
      else { for(int i=0;i<K;i++) CK(cuMemUnmap(va+i*H*g,H*g)); }
      double t1=now();
      (mode?each:one)[rep]=t1-t0;
      /* remap the handles elsewhere in the same range to check they are intact and unmapped */
      for(int i=0;i<K;i++) CK(cuMemMap(va+i*H*g,H*g,0,h[K-1-i],0));
      CK(cuMemSetAccess(va,K*H*g,&a,1));
      unsigned x=0; CK(cuMemcpyDtoH(&x,va+3*H*g+12,4)); if(x!=7u){printf("FAIL content %u\n",x);return 1;}
      CK(cuMemUnmap(va,K*H*g));
      for(int i=0;i<K;i++) CK(cuMemRelease(h[i]));
    }
  }
  /* medians */
  for(int m=0;m<2;m++){double*v=m?each:one; for(int i=0;i<REPS;i++)for(int j=i+1;j<REPS;j++)if(v[j]<v[i]){double t=v[i];v[i]=v[j];v[j]=t;}
    printf("%s: median %.1f us, min %.1f, max %.1f (%d handles of %d pages, %d reps)\n", m?"one cuMemUnmap per handle":"one cuMemUnmap over all", v[REPS/2]*1e6, v[0]*1e6, v[REPS-1]*1e6, K, H, REPS);}
  printf("OK\n"); return 0;
}
