from dashgen.cli import main

main()
