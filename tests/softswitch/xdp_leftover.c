/* A stand-in for an XDP program another tool left on an interface (tests of softswitch's AF_XDP
 * port I/O, test_af_xdp.py): "return XDP_DROP", loaded with the bpf() syscall; the test attaches
 * it the old way, by netlink, where it stays after its descriptor is closed. */
#include <errno.h>
#include <linux/bpf.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int leftover_program(void) {
    struct bpf_insn prog[] = {
        { .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = XDP_DROP },
        { .code = BPF_JMP | BPF_EXIT },
    };
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.prog_type = BPF_PROG_TYPE_XDP;
    attr.insns = (unsigned long)prog;
    attr.insn_cnt = 2;
    attr.license = (unsigned long)"Apache-2.0";
    strcpy(attr.prog_name, "leftover_drop");
    int fd = (int)syscall(__NR_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
    return fd < 0 ? -errno : fd;
}
