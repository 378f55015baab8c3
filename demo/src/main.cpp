// placeholder, replaced by the smoke program
int main() { return 0; }
