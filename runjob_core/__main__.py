from runjob_core.cli import main

main()
