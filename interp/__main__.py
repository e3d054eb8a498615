from interp.cli.main import main

main()
