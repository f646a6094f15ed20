from hostagent.collectives.cli import main

raise SystemExit(main())
