from hostagent.allreduce.cli import main

raise SystemExit(main())
