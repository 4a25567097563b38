/* volk's loader, compiled into libkvc (Debian ships it as source in libvulkan-volk-dev). */
#include <volk.c>
