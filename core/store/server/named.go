package server

import "database/sql"

func namedArg(name string, v any) any { return sql.Named(name, v) }
