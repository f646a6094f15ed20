"""softswitch's native data path: a program's pipeline and the data plane in one shared library
per program (abi.h), built at pipeline push and driven from Python through a narrow control
interface, never per packet. Its ports are read and written through AF_XDP sockets where the
kernel gives one (xsk.c, the choice and its reasons in xsk.py), else through their AF_PACKET
sockets (``softswitch --port-io``)."""
