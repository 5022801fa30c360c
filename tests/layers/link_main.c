/* The whole of one layer's library (--whole-archive) linked with only the layers below it:
 * a call upward has no definition there, and the link fails (tests/layers/CMakeLists.txt). */
int main(void)
{
    return 0;
}
