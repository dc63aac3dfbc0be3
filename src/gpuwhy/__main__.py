from gpuwhy.cli import console_main

console_main()
