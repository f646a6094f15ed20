"""softswitch's native data path: a program's pipeline and the data plane in one shared library
per program (abi.h), built at pipeline push and driven from Python through a narrow control
interface, never per packet."""
