#include <stdio.h>
#include <string.h>

#include "jit-kernels.h"

void jk_build_maxplus(nx_x86_module *m, const char *name)
{
    LLVMContextRef c = nx_x86_module_context(m);
    LLVMModuleRef mod = nx_x86_module_llvm(m);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(c);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c);
    LLVMTypeRef pf = LLVMPointerType(f32, 0);
    LLVMTypeRef params[] = {pf, pf, pf, i64};
    LLVMValueRef fn =
        LLVMAddFunction(mod, name, LLVMFunctionType(LLVMVoidTypeInContext(c), params, 4, 0));
    unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
    for (unsigned i = 1; i <= 3; i++)
        LLVMAddAttributeAtIndex(fn, i, LLVMCreateEnumAttribute(c, noalias, 0));
    LLVMValueRef out = LLVMGetParam(fn, 0), a = LLVMGetParam(fn, 1), b = LLVMGetParam(fn, 2);
    LLVMValueRef n = LLVMGetParam(fn, 3);

    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c, fn, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c, fn, "exit");
    LLVMBuilderRef bld = LLVMCreateBuilderInContext(c);
    LLVMPositionBuilderAtEnd(bld, entry);
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0);
    LLVMBuildCondBr(bld, LLVMBuildICmp(bld, LLVMIntSGT, n, zero, "nonempty"), loop, exit);

    LLVMPositionBuilderAtEnd(bld, loop);
    LLVMValueRef i = LLVMBuildPhi(bld, i64, "i");
    LLVMValueRef pa = LLVMBuildInBoundsGEP2(bld, f32, a, &i, 1, "pa");
    LLVMValueRef pb = LLVMBuildInBoundsGEP2(bld, f32, b, &i, 1, "pb");
    LLVMValueRef po = LLVMBuildInBoundsGEP2(bld, f32, out, &i, 1, "po");
    LLVMValueRef s = LLVMBuildFAdd(bld, LLVMBuildLoad2(bld, f32, pa, "va"),
                                   LLVMBuildLoad2(bld, f32, pb, "vb"), "s");
    LLVMValueRef o = LLVMBuildLoad2(bld, f32, po, "vo");
    LLVMValueRef gt = LLVMBuildFCmp(bld, LLVMRealOGT, o, s, "gt");
    LLVMBuildStore(bld, LLVMBuildSelect(bld, gt, o, s, "m"), po);
    LLVMValueRef next = LLVMBuildNSWAdd(bld, i, LLVMConstInt(i64, 1, 0), "next");
    LLVMBuildCondBr(bld, LLVMBuildICmp(bld, LLVMIntSLT, next, n, "more"), loop, exit);
    LLVMValueRef in_v[] = {zero, next};
    LLVMBasicBlockRef in_b[] = {entry, loop};
    LLVMAddIncoming(i, in_v, in_b, 2);

    LLVMPositionBuilderAtEnd(bld, exit);
    LLVMBuildRetVoid(bld);
    LLVMDisposeBuilder(bld);
}

void jk_build_sum(nx_x86_module *m, const char *name, bool reorder)
{
    LLVMContextRef c = nx_x86_module_context(m);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(c), i64 = LLVMInt64TypeInContext(c);
    LLVMTypeRef params[] = {LLVMPointerType(f32, 0), i64};
    LLVMValueRef fn =
        LLVMAddFunction(nx_x86_module_llvm(m), name, LLVMFunctionType(f32, params, 2, 0));
    LLVMValueRef a = LLVMGetParam(fn, 0), n = LLVMGetParam(fn, 1);
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c, fn, "entry");
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(c, fn, "loop");
    LLVMBasicBlockRef exit = LLVMAppendBasicBlockInContext(c, fn, "exit");
    LLVMBuilderRef bld = LLVMCreateBuilderInContext(c);
    LLVMPositionBuilderAtEnd(bld, entry);
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0), fzero = LLVMConstReal(f32, 0.0);
    LLVMBuildCondBr(bld, LLVMBuildICmp(bld, LLVMIntSGT, n, zero, ""), loop, exit);
    LLVMPositionBuilderAtEnd(bld, loop);
    LLVMValueRef i = LLVMBuildPhi(bld, i64, "i");
    LLVMValueRef acc = LLVMBuildPhi(bld, f32, "acc");
    LLVMValueRef v = LLVMBuildLoad2(bld, f32, LLVMBuildInBoundsGEP2(bld, f32, a, &i, 1, ""), "");
    LLVMValueRef acc2 = LLVMBuildFAdd(bld, acc, v, "acc2");
    LLVMValueRef next = LLVMBuildNSWAdd(bld, i, LLVMConstInt(i64, 1, 0), "next");
    LLVMValueRef br = LLVMBuildCondBr(bld, LLVMBuildICmp(bld, LLVMIntSLT, next, n, ""), loop, exit);
    if (reorder)
        nx_x86_loop_allow_reorder(br);
    LLVMValueRef iv[] = {zero, next}, av[] = {fzero, acc2};
    LLVMBasicBlockRef ib[] = {entry, loop};
    LLVMAddIncoming(i, iv, ib, 2);
    LLVMAddIncoming(acc, av, ib, 2);
    LLVMPositionBuilderAtEnd(bld, exit);
    LLVMValueRef r = LLVMBuildPhi(bld, f32, "r");
    LLVMAddIncoming(r, av, ib, 2);
    LLVMBuildRet(bld, r);
    LLVMDisposeBuilder(bld);
}

void jk_text_maxplus(char *buf, size_t len, const char *name)
{
    snprintf(buf, len,
             "define void @%s(float* noalias %%out, float* noalias %%a, float* noalias %%b,"
             " i64 %%n) {\n"
             "entry:\n"
             "  %%ne = icmp sgt i64 %%n, 0\n"
             "  br i1 %%ne, label %%loop, label %%exit\n"
             "loop:\n"
             "  %%i = phi i64 [0, %%entry], [%%next, %%loop]\n"
             "  %%pa = getelementptr inbounds float, float* %%a, i64 %%i\n"
             "  %%pb = getelementptr inbounds float, float* %%b, i64 %%i\n"
             "  %%po = getelementptr inbounds float, float* %%out, i64 %%i\n"
             "  %%va = load float, float* %%pa\n"
             "  %%vb = load float, float* %%pb\n"
             "  %%s = fadd float %%va, %%vb\n"
             "  %%vo = load float, float* %%po\n"
             "  %%gt = fcmp ogt float %%vo, %%s\n"
             "  %%m = select i1 %%gt, float %%vo, float %%s\n"
             "  store float %%m, float* %%po\n"
             "  %%next = add nsw i64 %%i, 1\n"
             "  %%more = icmp slt i64 %%next, %%n\n"
             "  br i1 %%more, label %%loop, label %%exit\n"
             "exit:\n"
             "  ret void\n"
             "}\n",
             name);
}

void jk_text_sum(char *buf, size_t len, const char *name)
{
    snprintf(buf, len,
             "define float @%s(float* noalias %%a, i64 %%n) {\n"
             "entry:\n"
             "  %%ne = icmp sgt i64 %%n, 0\n"
             "  br i1 %%ne, label %%loop, label %%exit\n"
             "loop:\n"
             "  %%i = phi i64 [0, %%entry], [%%next, %%loop]\n"
             "  %%acc = phi float [0.0, %%entry], [%%acc2, %%loop]\n"
             "  %%p = getelementptr inbounds float, float* %%a, i64 %%i\n"
             "  %%v = load float, float* %%p\n"
             "  %%acc2 = fadd reassoc float %%acc, %%v\n"
             "  %%next = add nsw i64 %%i, 1\n"
             "  %%more = icmp slt i64 %%next, %%n\n"
             "  br i1 %%more, label %%loop, label %%exit\n"
             "exit:\n"
             "  %%r = phi float [0.0, %%entry], [%%acc2, %%loop]\n"
             "  ret float %%r\n"
             "}\n",
             name);
}

void jk_ref_maxplus(float *out, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float s = a[i] + b[i];
        out[i] = out[i] > s ? out[i] : s;
    }
}
