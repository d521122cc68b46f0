// communicator.cpp: out-of-line anchor for the Communicator vtable.
#include "comm/communicator.h"
