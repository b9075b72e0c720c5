// Package views builds the rows the CLI prints and the dashboard shows
// from one observation, so both surfaces say the same thing about a
// Service: `ployz ls` and the dashboard's Services page read Services here.
package views
