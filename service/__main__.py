from service.cli import AS_MODULE, main

raise SystemExit(main(prog=AS_MODULE))
