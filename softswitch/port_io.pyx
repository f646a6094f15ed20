# cython: language_level=3
"""port_io.py's PortIO compiled: a port's waiting frames read with one recvmmsg, a run of frames
for one port sent with one sendmmsg. Same interface, same order, same losses. Built and loaded
with the compiled packet path (pipeline/compiled.py), which names the module."""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.stdlib cimport calloc, free, malloc

from softswitch.port_io import BATCH, MAX_FRAME


cdef extern from "<sys/socket.h>" nogil:
    struct iovec:
        void *iov_base
        size_t iov_len
    struct msghdr:
        void *msg_name
        unsigned msg_namelen
        iovec *msg_iov
        size_t msg_iovlen
        void *msg_control
        size_t msg_controllen
        int msg_flags
    struct mmsghdr:
        msghdr msg_hdr
        unsigned msg_len
    int recvmmsg(int fd, mmsghdr *msgs, unsigned vlen, int flags, void *timeout)
    int sendmmsg(int fd, mmsghdr *msgs, unsigned vlen, int flags)


cdef class PortIO:
    """One system call per batch. Its buffers are its own: one instance per data plane."""

    cdef readonly int batch
    cdef Py_ssize_t max_frame
    cdef char *buffers             # batch frames of max_frame bytes, read into
    cdef iovec *iov_in
    cdef mmsghdr *msg_in
    cdef iovec *iov_out            # pointing into the bytes objects being sent
    cdef mmsghdr *msg_out

    def __cinit__(self, int batch=BATCH):
        cdef int i
        if batch < 1:
            raise ValueError(f"batch must be at least 1, not {batch}")
        self.batch, self.max_frame = batch, MAX_FRAME
        self.buffers = <char *>malloc(batch * self.max_frame)     # pages touched only as frames come
        self.iov_in = <iovec *>calloc(batch, sizeof(iovec))
        self.msg_in = <mmsghdr *>calloc(batch, sizeof(mmsghdr))
        self.iov_out = <iovec *>calloc(batch, sizeof(iovec))
        self.msg_out = <mmsghdr *>calloc(batch, sizeof(mmsghdr))
        if not (self.buffers and self.iov_in and self.msg_in and self.iov_out and self.msg_out):
            raise MemoryError()
        for i in range(batch):
            self.iov_in[i].iov_base = self.buffers + i * self.max_frame
            self.iov_in[i].iov_len = self.max_frame
            self.msg_in[i].msg_hdr.msg_iov = &self.iov_in[i]
            self.msg_in[i].msg_hdr.msg_iovlen = 1
            self.msg_out[i].msg_hdr.msg_iov = &self.iov_out[i]
            self.msg_out[i].msg_hdr.msg_iovlen = 1

    def __dealloc__(self):
        free(self.buffers)
        free(self.iov_in)
        free(self.msg_in)
        free(self.iov_out)
        free(self.msg_out)

    @property
    def batched(self):
        return True

    def recv(self, int fd):
        """Up to ``batch`` frames waiting on the non-blocking socket ``fd`` (none: [])."""
        cdef int got, i
        with nogil:
            got = recvmmsg(fd, self.msg_in, self.batch, 0, NULL)
        frames = []
        for i in range(got):          # got -1: EAGAIN, nothing more to read; or the interface went
            frames.append(PyBytes_FromStringAndSize(self.buffers + i * self.max_frame, self.msg_in[i].msg_len))
        return frames

    def send_run(self, int fd, list waiting, Py_ssize_t start):
        """Send the frames of ``waiting`` (port, frame) from ``start`` on while their port is
        the first one's, by the socket ``fd``: (index after the run, frames sent, frames lost)."""
        cdef Py_ssize_t n = len(waiting), end = start, sent = 0, lost = 0
        cdef int count, k, done
        port = waiting[start][0]
        keep = []                     # frames turned into bytes here, alive until sent
        while end < n:
            count = 0
            while end < n and count < self.batch:
                p, frame = waiting[end]
                if p != port:
                    break
                if not PyBytes_CheckExact(frame):
                    frame = bytes(frame)
                    keep.append(frame)
                self.iov_out[count].iov_base = PyBytes_AS_STRING(frame)
                self.iov_out[count].iov_len = PyBytes_GET_SIZE(frame)
                count += 1
                end += 1
            if count == 0:
                break
            k = 0
            while k < count:
                with nogil:
                    done = sendmmsg(fd, self.msg_out + k, count - k, 0)
                if done < 0:
                    done = 0
                sent += done
                k += done
                if k < count:         # sendmmsg stops at a frame the kernel refused: it is lost
                    lost += 1
                    k += 1
        return end, sent, lost
