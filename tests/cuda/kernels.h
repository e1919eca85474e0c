/* CUDA C kernels used by the CUDA tests: the shapes the backend's code generator will emit, written
 * out by hand. */
#ifndef NX_TEST_CUDA_KERNELS_H
#define NX_TEST_CUDA_KERNELS_H

/* out[i] = max(x[i] + y[i], 0). Four elements per load (float4, 16-byte accesses), a grid-stride
 * loop, then a scalar tail for n % 4. Pointers must be 16-byte aligned (device blocks are). */
static const char kernel_add_relu[] =
    "extern \"C\" __global__ void add_relu(const float *__restrict__ x,\n"
    "                                      const float *__restrict__ y,\n"
    "                                      float *__restrict__ out, long long n)\n"
    "{\n"
    "    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    long long stride = (long long)gridDim.x * blockDim.x;\n"
    "    long long n4 = n / 4;\n"
    "    const float4 *x4 = reinterpret_cast<const float4 *>(x);\n"
    "    const float4 *y4 = reinterpret_cast<const float4 *>(y);\n"
    "    float4 *o4 = reinterpret_cast<float4 *>(out);\n"
    "    for (long long i = tid; i < n4; i += stride) {\n"
    "        float4 a = x4[i], b = y4[i], r;\n"
    "        r.x = fmaxf(a.x + b.x, 0.0f);\n"
    "        r.y = fmaxf(a.y + b.y, 0.0f);\n"
    "        r.z = fmaxf(a.z + b.z, 0.0f);\n"
    "        r.w = fmaxf(a.w + b.w, 0.0f);\n"
    "        o4[i] = r;\n"
    "    }\n"
    "    for (long long i = n4 * 4 + tid; i < n; i += stride)\n"
    "        out[i] = fmaxf(x[i] + y[i], 0.0f);\n"
    "}\n";

/* C[m][n] = max_k (A[m][k] + B[k][n]), row-major, any M, N, K >= 1. Register-tiled: a block of
 * 256 threads computes a 64x64 tile of C, each thread a 4x4 sub-tile (rows ty + 16i, columns
 * tx + 16j, so shared-memory reads are conflict-free); 16-wide k-slices of A and B are staged
 * through shared memory. No M x K x N intermediate exists. The k-loop stops at K, so no padding
 * value ever meets real data. */
static const char kernel_maxplus[] =
    "#define BM 64\n"
    "#define BN 64\n"
    "#define BK 16\n"
    "#define TM 4\n"
    "#define TN 4\n"
    "extern \"C\" __global__ void __launch_bounds__(256)\n"
    "maxplus_matmul(const float *__restrict__ A, const float *__restrict__ B,\n"
    "               float *__restrict__ C, int M, int N, int K)\n"
    "{\n"
    "    __shared__ float As[BK][BM + 1];\n"
    "    __shared__ float Bs[BK][BN];\n"
    "    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;\n"
    "    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;\n"
    "    float acc[TM][TN];\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < TM; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < TN; j++)\n"
    "            acc[i][j] = -__int_as_float(0x7f800000);\n"
    "    for (int k0 = 0; k0 < K; k0 += BK) {\n"
    "        for (int l = threadIdx.x; l < BM * BK; l += 256) {\n"
    "            int m = l / BK, k = l % BK;\n"
    "            int gm = row0 + m, gk = k0 + k;\n"
    "            As[k][m] = (gm < M && gk < K) ? A[(size_t)gm * K + gk] : 0.0f;\n"
    "        }\n"
    "        for (int l = threadIdx.x; l < BK * BN; l += 256) {\n"
    "            int k = l / BN, n = l % BN;\n"
    "            int gk = k0 + k, gn = col0 + n;\n"
    "            Bs[k][n] = (gk < K && gn < N) ? B[(size_t)gk * N + gn] : 0.0f;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        const int kn = min(BK, K - k0);\n"
    "        for (int k = 0; k < kn; k++) {\n"
    "            float a[TM], b[TN];\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < TM; i++)\n"
    "                a[i] = As[k][ty + 16 * i];\n"
    "#pragma unroll\n"
    "            for (int j = 0; j < TN; j++)\n"
    "                b[j] = Bs[k][tx + 16 * j];\n"
    "#pragma unroll\n"
    "            for (int i = 0; i < TM; i++)\n"
    "#pragma unroll\n"
    "                for (int j = 0; j < TN; j++)\n"
    "                    acc[i][j] = fmaxf(acc[i][j], a[i] + b[j]);\n"
    "        }\n"
    "        __syncthreads();\n"
    "    }\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < TM; i++) {\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < TN; j++) {\n"
    "            int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;\n"
    "            if (r < M && c < N)\n"
    "                C[(size_t)r * N + c] = acc[i][j];\n"
    "        }\n"
    "    }\n"
    "}\n";

/* A source with a deliberate error: the log must name the undeclared identifier. */
static const char kernel_broken[] =
    "extern \"C\" __global__ void broken(float *out)\n"
    "{\n"
    "    out[threadIdx.x] = undeclared_value_xyz;\n"
    "}\n";

#endif
