from reproduce.cli import main

main()
