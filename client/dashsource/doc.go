// Package dashsource is the dashboard's Source (core/dashboard) over an
// operator library Session: every page and action of `ployz dashboard`
// reads and acts through the same client calls as the CLI. A button is
// the confirmation of its action, so actions apply their plan at once
// and write its text (client/render) into the action's output.
package dashsource
