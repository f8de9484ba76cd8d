from streamkit.cli import main

main()
