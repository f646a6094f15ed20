from hostagent.traffic.cli import main

raise SystemExit(main())
