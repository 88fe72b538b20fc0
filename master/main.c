/* rover-master: placeholder entry point until the daemon lands. */
#include <stdio.h>

int main(void)
{
	fputs("rover-master: not built yet\n", stderr);
	return 2;
}
