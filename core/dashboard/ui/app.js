// Ployz dashboard: plain JS, no build step. Every page is a hash route
// fed by one Server-Sent Events stream; DOM is built with textContent only.
"use strict";
(function () {
  const view = document.getElementById("view");
  const live = document.getElementById("live");
  let token = null;
  let streams = [];
  let timers = [];
  let plots = [];

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const st = (s) => el("span", { class: "st-" + String(s || "").replace(/\s+/g, "-") }, s || "-");
  // table builds a table; each cell carries its column's name, which a
  // phone-width layout shows beside the value when rows stack as cards.
  function table(id, head, rows) {
    const names = head.map((h) => h.replace(/^~/, ""));
    rows.forEach((tr) => [...tr.children].forEach((td, i) => { if (names[i]) td.dataset.label = names[i]; }));
    return el("div", { class: "table-wrap" }, el("table", { id },
      el("thead", {}, el("tr", {}, head.map((h) => el("th", { scope: "col", class: h.startsWith("~") ? "hide-narrow" : null }, h.replace(/^~/, ""))))),
      el("tbody", {}, rows)));
  }
  function unobserved(list) {
    if (!list || !list.length) return document.createDocumentFragment();
    return el("p", { class: "warn", role: "note" }, "Not observed: " + list.map((u) => (u.name || u.machine_id) + " (" + u.reason + ")").join(", "));
  }
  // bytes is n in binary units as the CLI prints it (go-units BytesSize).
  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    n = Number(n || 0);
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return +n.toPrecision(4) + u[i];
  }
  const nanoTime = (ns) => ns ? new Date(ns / 1e6).toLocaleString() : "-";
  const volumeHref = (machine, name) => "#/volume/" + encodeURIComponent(machine) + "/" + encodeURIComponent(name);
  const serviceHref = (ns, svc) => "#/service/" + encodeURIComponent(ns) + "/" + encodeURIComponent(svc);
  // mountLine is one Container mounting a volume, linking its Service.
  const mountLine = (m) => el("div", { "data-mount": m.container },
    el("a", { href: serviceHref(m.namespace, m.service) }, m.service), " " + m.container + " ", st(m.state),
    " → " + m.target + (m.read_only ? " (read-only)" : ""));
  // protectionLines are a volume's protection as `ployz volume inspect`
  // says it (the server's strings): automatic snapshots, each Mirror's
  // lag (overdue: more than twice its every behind) and a failed
  // scheduled run with its error.
  function protectionLines(p) {
    if (!p) return [];
    const out = [];
    if (p.snapshots_line) out.push(el("div", { "data-protection": "snapshots" }, p.snapshots_line));
    (p.mirror_lines || []).forEach((l) => out.push(el("div", { "data-mirror": l.machine, class: l.overdue ? "overdue" : null },
      l.text, l.overdue ? " (more than twice its every, " + p.mirror_every + ")" : "")));
    if (p.mirror_every && !(p.mirror_lines || []).length && !p.error) out.push(el("div", { class: "muted" }, "no Mirror synced yet (every " + p.mirror_every + ")"));
    if (p.failed_run) out.push(el("div", { "data-protection": "failed", class: "overdue" }, p.failed_run));
    if (p.error) out.push(el("div", { class: "warn" }, "Mirror lag unknown: " + p.error));
    return out;
  }
  function ago(t) {
    const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
    return s < 90 ? s + "s ago" : s < 5400 ? Math.round(s / 60) + "m ago" : new Date(t).toLocaleString();
  }

  // runOutcome is a run's status with its exit code, as `ployz jobs ls` prints it.
  const runOutcome = (x) => st(x.exit_code !== undefined ? x.status + " (exit " + x.exit_code + ")" : x.status);
  function until(ms) {
    const s = Math.round((ms - Date.now()) / 1000);
    return s <= 0 ? "due" : s < 90 ? "in " + s + "s" : s < 5400 ? "in " + Math.round(s / 60) + "m" : "in " + Math.round(s / 3600) + "h";
  }
  const duration = (ms) => ms < 60000 ? +(ms / 1000).toFixed(1) + "s" : Math.floor(ms / 60000) + "m" + Math.round((ms % 60000) / 1000) + "s";

  function stop() {
    streams.forEach((s) => s.close());
    timers.forEach((t) => clearInterval(t));
    plots.forEach((p) => p.destroy());
    streams = []; timers = []; plots = [];
  }

  // follow opens the view's event stream; render runs on every change,
  // deferred while a form field in the live region has focus.
  function follow(query, region, render) {
    let pending = null;
    const apply = (state) => {
      // A re-render keeps what the reader opened: restored at once, so an
      // update already queued reads it back from the page (a restore left
      // for later lost it when two updates came back to back), and once
      // more after whatever the render appends later.
      const open = new Set([...region.querySelectorAll("details[data-key]")].filter((d) => d.open).map((d) => d.dataset.key));
      region.replaceChildren();
      const restore = () => region.querySelectorAll("details[data-key]").forEach((d) => { if (open.has(d.dataset.key)) d.open = true; });
      if (state.error) region.append(el("p", { class: "error", role: "alert" }, (state.field ? state.field + ": " : "") + state.error));
      else render(state.data, region);
      restore();
      setTimeout(restore, 0);
    };
    // Updates also wait while a button is held down in the region:
    // replacing the element between press and release swallows the click.
    let pressed = false;
    const ac = new AbortController(); // the page's listeners go with the view
    streams.push({ close: () => ac.abort() });
    const held = () => pressed || (region.contains(document.activeElement) && document.activeElement.tagName === "INPUT");
    const flush = () => setTimeout(() => {
      if (pending && !held()) { apply(pending); pending = null; }
    }, 0);
    region.addEventListener("focusout", flush);
    region.addEventListener("pointerdown", () => { pressed = true; });
    const release = () => { if (pressed) { pressed = false; flush(); } };
    document.addEventListener("pointerup", release, { signal: ac.signal });
    document.addEventListener("pointercancel", release, { signal: ac.signal });
    const es = new EventSource("api/events?" + query);
    es.addEventListener("view", (ev) => {
      const state = JSON.parse(ev.data);
      live.textContent = "live"; live.className = "live ok";
      if (held()) pending = state;
      else apply(state);
    });
    es.onerror = () => { live.textContent = "reconnecting"; live.className = "live bad"; };
    streams.push(es);
  }

  async function session() {
    if (token) return token;
    const r = await fetch("api/session");
    token = (await r.json()).token;
    return token;
  }
  async function act(path, body, out, button) {
    button.disabled = true;
    out.textContent = path.replace("api/", "") + " " + body.service + ": running…";
    try {
      const r = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json", "X-Ployz-Token": await session() }, body: JSON.stringify(body) });
      const a = await r.json();
      if (a.field) out.textContent = a.field + ": " + a.error;
      else out.textContent = (a.status || "failed") + (a.error ? ": " + a.error : "") + (a.output ? "\n" + a.output : "");
    } catch (e) {
      out.textContent = "failed: " + e;
    } finally {
      button.disabled = false;
    }
  }
  // actions are a Service's buttons; scale and restart deploy its Saved
  // State (saved), stop and start act on the existing Containers.
  function actions(ns, svc, desired, out, saved) {
    const span = el("span", { class: "inline" });
    const key = ns + "/" + svc;
    if (saved) {
      const n = el("input", { type: "number", min: "0", max: "100", value: /^\d+$/.test(desired) ? desired : "1", "aria-label": "Replicas of " + svc, name: "replicas" });
      const scaleBtn = el("button", { type: "submit" }, "Scale");
      span.append(el("form", { class: "inline", "data-scale": key, onsubmit: (e) => {
        e.preventDefault();
        act("api/scale", { namespace: ns, service: svc, replicas: Number(n.value) }, out, scaleBtn);
      } }, n, scaleBtn), " ");
      span.replicas = n;
    }
    for (const verb of saved ? ["restart", "stop", "start"] : ["stop", "start"]) {
      const b = el("button", { type: "button", ["data-" + verb]: key, onclick: () => act("api/" + verb, { namespace: ns, service: svc }, out, b) }, verb[0].toUpperCase() + verb.slice(1));
      span.append(b, " ");
    }
    return span;
  }

  const pages = {
    cluster() {
      const region = el("div");
      view.append(el("h1", {}, "Cluster"), region);
      follow("view=cluster", region, (c, r) => {
        r.append(el("p", { class: "meta" }, "Observed by " + c.observer + ", " + ago(c.observed_at)));
        r.append(table("machines", ["Machine", "Phase", "Membership", "RTT", "Version", "Drain", "~Subnet", "Plugins", "~Capabilities"],
          (c.machines || []).map((m) => el("tr", { "data-machine": m.name },
            el("td", {}, m.name, el("div", { class: "muted" }, (m.id || "").slice(0, 8))),
            el("td", {}, st(m.phase)), el("td", {}, st(m.membership)),
            el("td", {}, m.rtt_ms ? m.rtt_ms.toFixed(1) + " ms" : "-"),
            el("td", {}, m.version || "-"),
            el("td", {}, m.drained_since ? "drained since " + m.drained_since : "accepting"),
            el("td", { class: "hide-narrow" }, m.subnet || "-"),
            el("td", { class: "chips" }, m.plugins_error ? el("span", { class: "st-unknown" }, "unknown: " + m.plugins_error)
              : (m.plugins || []).map((p) => el("span", { title: p.capabilities.join(", ") }, p.name + " " + (p.version || "") + " ", st(p.health)))),
            el("td", { class: "hide-narrow" }, el("details", { "data-key": "caps-" + m.id }, el("summary", {}, (m.capabilities || []).length + " capabilities"),
              el("div", { class: "chips" }, (m.capabilities || []).map((cap) => el("span", {}, cap)))))))));
      });
    },
    services() {
      const out = el("pre", { id: "action-result", role: "status", "aria-live": "polite" });
      const region = el("div");
      view.append(el("h1", {}, "Services"), region, el("h2", {}, "Last action"), out);
      follow("view=services", region, (s, r) => {
        r.append(unobserved(s.unobserved));
        r.append(table("services", ["Service", "~Namespace", "Desired", "~Running", "Ready", "Execution", "Ingress", "Certificates", "~Restarts", "Actions"],
          (s.services || []).map((row) => el("tr", { "data-service": row.namespace + "/" + row.service },
            el("td", {}, el("a", { href: "#/service/" + encodeURIComponent(row.namespace) + "/" + encodeURIComponent(row.service) }, row.service)),
            el("td", { class: "hide-narrow" }, row.namespace), el("td", {}, row.desired),
            el("td", { class: "hide-narrow" }, row.running), el("td", {}, row.ready),
            el("td", {}, st(row.execution), row.down_on ? el("div", { class: "muted" }, (row.ready ? "replicas on Down " : "every serving replica is on Down ") + row.down_on.join(", ")) : null, row.below_replicas ? el("div", { class: "muted" }, row.not_ready_on ? "not ready on " + row.not_ready_on.join(", ") : "below replicas") : null),
            el("td", {}, st(row.ingress)),
            el("td", { class: "certs" }, (row.certificates || []).length ? row.certificates.map(cert) : "-"),
            el("td", { class: "hide-narrow" }, row.restarts),
            el("td", {}, actions(row.namespace, row.service, row.desired, out, row.scalable))))));
      });
    },
    service(ns, svc) {
      const out = el("pre", { id: "action-result", role: "status", "aria-live": "polite" });
      const region = el("div");
      const logs = el("pre", { id: "logs", tabindex: "0", "aria-label": "Live logs" });
      const logStreams = el("p", { id: "log-streams", class: "warn", role: "status", "aria-live": "polite", hidden: true });
      const charts = el("div", { class: "charts", id: "charts" });
      const gaps = el("ul", { id: "gaps", class: "muted" });
      let range = "1h";
      const rangeBtns = ["1h", "24h", "90d"].map((r) => el("button", { type: "button", "aria-pressed": String(r === range), "data-range": r, onclick: () => {
        range = r; rangeBtns.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.range === r))); loadMetrics();
      } }, r));
      const acts = actions(ns, svc, "", out, true);
      view.append(el("h1", {}, svc + " ", el("span", { class: "muted" }, ns)),
        el("p", {}, acts), out, region,
        el("h2", {}, "Metrics"), el("div", { role: "group", "aria-label": "Range" }, rangeBtns), charts, gaps,
        el("h2", {}, "Logs ", el("span", { class: "muted" }, "following every Machine")), logStreams, logs);
      follow("view=service&namespace=" + encodeURIComponent(ns) + "&service=" + encodeURIComponent(svc), region, (s, r) => {
        if (acts.replicas && !acts.replicas.dataset.set) { acts.replicas.value = s.desired; acts.replicas.dataset.set = "1"; }
        renderService(s, r);
      });
      followLogs(ns, svc, logs, logStreams);
      async function loadMetrics() {
        const q = "api/metrics?range=" + range + "&namespace=" + encodeURIComponent(ns) + "&service=" + encodeURIComponent(svc);
        const r = await fetch(q);
        const c = await r.json();
        plots.forEach((p) => p.destroy()); plots = [];
        charts.replaceChildren(); gaps.replaceChildren();
        if (c.error) { charts.append(el("p", { class: "error" }, c.error)); return; }
        if (!c.charts || !c.charts.length) charts.append(el("p", { class: "muted" }, "No samples in this range."));
        (c.charts || []).forEach((ch) => drawChart(ch, c.markers || [], charts));
        (c.gaps || []).forEach((g) => gaps.append(el("li", { "data-gap": g.machine }, g.machine + " " + g.metric + ": gap " +
          new Date(g.from * 1000).toLocaleString() + " to " + new Date(g.to * 1000).toLocaleString() + " — " + g.reason)));
      }
      loadMetrics();
      timers.push(setInterval(loadMetrics, 30000));
    },
    deploys() {
      const region = el("div");
      view.append(el("h1", {}, "Deploys"), region);
      follow("view=deploys", region, (d, r) => {
        r.append(el("h2", {}, "Deploys from this computer"));
        if (!d.records || !d.records.length) r.append(el("p", { class: "muted" }, "None recorded yet in this context (`ployz deploy` records each one)."));
        (d.records || []).forEach((x) => r.append(deployRecord(x)));
        r.append(el("h2", {}, "Last outcome per Machine"));
        r.append(table("outcomes", ["Namespace", "Machine", "Outcome", "Deployment", "~When"],
          (d.last_outcomes || []).map((o) => el("tr", { "data-outcome": o.namespace + "/" + o.machine },
            el("td", {}, o.namespace), el("td", {}, o.machine),
            el("td", {}, st(words(o.status)), o.error ? el("div", { class: "muted" }, o.error) : null),
            el("td", {}, o.deployment_id + (o.revision ? " (revision " + o.revision + ")" : "")),
            el("td", { class: "hide-narrow" }, ago(o.at))))));
        r.append(el("h2", {}, "Actions from this dashboard"));
        if (!d.actions || !d.actions.length) r.append(el("p", { class: "muted" }, "None yet. Deploys with a compose file stay a CLI action."));
        (d.actions || []).forEach((a) => r.append(el("details", { "data-action": a.id, "data-key": "action-" + a.id, open: a.status === "running" },
          el("summary", {}, "#" + a.id + " " + a.kind + " " + a.namespace + "/" + a.service + (a.replicas !== undefined ? " to " + a.replicas : "") + " — ", st(a.status), " " + ago(a.started)),
          el("pre", {}, (a.error ? a.error + "\n" : "") + a.output))));
        r.append(el("h2", {}, "Running deployments per Machine"));
        r.append(table("running", ["Namespace", "Machine", "Deployments its Containers carry"],
          (d.running || []).map((x) => el("tr", {}, el("td", {}, x.namespace), el("td", {}, x.machine), el("td", {}, x.deployments.join(", "))))));
        r.append(el("h2", {}, "Saved State revisions"));
        r.append(table("revisions", ["Namespace", "Revision", "Saved", "Latest"],
          (d.revisions || []).map((v) => el("tr", { "data-revision": v.namespace + "#" + v.revision }, el("td", {}, v.namespace), el("td", {}, v.revision),
            el("td", {}, new Date(v.created_at).toLocaleString()), el("td", {}, v.latest ? "latest" : "")))));
      });
    },
    volumes() {
      const region = el("div");
      view.append(el("h1", {}, "Volumes"), region);
      follow("view=volumes", region, (v, r) => {
        r.append(el("p", { class: "meta" }, "Provisioned Volumes (ZFS datasets with a quota), asked of every Machine now, as `ployz volume ls` does."));
        r.append(unobserved(v.unobserved));
        if (v.mounts_error) r.append(el("p", { class: "warn", role: "note" }, "Which Containers mount a volume is unknown: " + v.mounts_error));
        const rows = [];
        (v.machines || []).forEach((m) => ((m.list && m.list.volumes) || []).forEach((x) => {
          const ms = (v.mounts || []).filter((u) => u.machine === m.machine && u.volume === x.name);
          const last = x.snapshots.length ? x.snapshots[x.snapshots.length - 1] : null;
          const prot = (m.protection || {})[x.name];
          rows.push(el("tr", { "data-volume": m.machine + "/" + x.name, class: prot && prot.alert ? "failing" : null },
            el("td", {}, el("a", { href: volumeHref(m.machine, x.name) }, x.name)), el("td", {}, m.machine),
            el("td", {}, x.size_bytes ? bytes(x.size_bytes) : "none"), el("td", {}, bytes(x.used_bytes)),
            el("td", {}, x.snapshots.length + (last ? " (latest " + last.name + ")" : "")),
            el("td", {}, prot ? protectionLines(prot) : el("span", { class: "muted" }, "-")),
            el("td", { class: "hide-narrow" }, x.mountpoint),
            el("td", {}, ms.length ? ms.map(mountLine) : v.mounts_error ? st("unknown") : el("span", { class: "muted" }, "not mounted"),
              x.resume_token ? el("div", { class: "warn" }, "an interrupted receive can be resumed") : null)));
        }));
        if (rows.length) r.append(table("volumes", ["Volume", "Machine", "Size", "Used", "Snapshots", "Protection", "~Mountpoint", "Mounted by"], rows));
        else r.append(el("p", { id: "no-volumes", class: "muted" }, "No Provisioned Volumes on any Machine that answered (`ployz volume create NAME --machine M --size 1GiB`)."));
        r.append(el("h2", {}, "Machines"));
        r.append(table("volume-machines", ["Machine", "Pool", "~Health", "~Free", "Volumes"],
          (v.machines || []).map((m) => el("tr", { "data-machine": m.machine, "data-state": m.state },
            el("td", {}, m.machine),
            // A Machine without a pool or an answer is named as `ployz volume ls` names it.
            el("td", {}, m.state === "pool" ? m.list.pool : el("span", { class: m.state === "no_pool" ? "st-no-ZFS-pool" : "st-no-answer" }, m.note)),
            el("td", { class: "hide-narrow" }, m.state === "pool" ? st(m.list.health || "unknown") : "-"),
            el("td", { class: "hide-narrow" }, m.state === "pool" && m.list.free_bytes ? bytes(m.list.free_bytes) : "-"),
            el("td", {}, m.state === "no_answer" ? "unknown" : String(m.list.volumes.length))))));
      });
    },
    jobs() {
      const region = el("div");
      view.append(el("h1", {}, "Scheduled jobs"), region);
      follow("view=jobs", region, (d, r) => {
        r.append(el("p", { class: "meta" }, "Jobs declared with x-schedule, as `ployz jobs ls --all` lists them. A run's output: `ployz logs JOB --container CONTAINER` with its project's -p and --env."));
        if (!d.jobs.length) { r.append(el("p", { id: "no-jobs", class: "muted" }, "No scheduled jobs (a compose Service with x-schedule declares one).")); return; }
        r.append(table("jobs", ["Job", "Schedule", "Next tick", "~Image", "Last run"], d.jobs.map((j) => {
          const last = j.runs[0];
          return el("tr", { "data-job": j.namespace + "/" + j.service, class: j.failing ? "failing" : null },
            el("td", {}, j.service, el("div", { class: "muted" }, j.namespace)),
            el("td", {}, el("code", {}, j.cron), j.timezone ? " (" + j.timezone + ")" : "", el("div", { class: "muted" }, "concurrency " + j.concurrency)),
            el("td", {}, j.next ? new Date(j.next).toLocaleString() + " (" + until(j.next) + ")" : "-"),
            el("td", { class: "hide-narrow" }, j.image || "-"),
            el("td", {}, last ? [runOutcome(last), " " + ago(last.tick)] : el("span", { class: "muted" }, "no runs yet")));
        })));
        r.append(el("h2", {}, "Newest runs"));
        const rows = d.jobs.flatMap((j) => j.runs.map((x) => el("tr", { "data-run": j.namespace + "/" + j.service + "@" + x.tick, class: x.failed ? "run-failed" : null },
          el("td", {}, j.service, el("div", { class: "muted" }, j.namespace)), el("td", {}, new Date(x.tick).toLocaleString()),
          el("td", {}, runOutcome(x), x.error && x.exit_code === undefined ? el("div", { class: "muted" }, x.error) : null),
          el("td", {}, x.duration_ms ? duration(x.duration_ms) : "-"), el("td", {}, x.machine_name || x.machine || "-"),
          el("td", { class: "hide-narrow" }, x.container || "-",
            x.container ? el("div", { class: "muted" }, "ployz logs " + j.service + " --container " + x.container) : null))));
        if (rows.length) r.append(table("job-runs", ["Job", "Tick", "Outcome", "Duration", "Machine", "~Container"], rows));
        else r.append(el("p", { class: "muted" }, "No runs yet."));
      });
    },
    volume(machine, name) {
      const region = el("div");
      view.append(el("h1", {}, name + " ", el("span", { class: "muted" }, "on " + machine)),
        el("p", {}, el("a", { href: "#/volumes" }, "All volumes")), region);
      follow("view=volume&machine=" + encodeURIComponent(machine) + "&name=" + encodeURIComponent(name), region, (d, r) => {
        const x = d.volume;
        const facts = [["Machine", d.machine], ["Pool", d.pool || "-"], ["Dataset", x.dataset || "-"], ["Mountpoint", x.mountpoint],
          ["Size (quota)", x.size_bytes ? bytes(x.size_bytes) : "none"], ["Used", bytes(x.used_bytes)], ["Created", nanoTime(x.created_unix_nano)]];
        r.append(el("dl", { id: "volume-facts", class: "facts" }, facts.flatMap(([k, val]) => [el("dt", {}, k), el("dd", {}, val)])));
        if (x.resume_token) r.append(el("p", { class: "warn", role: "note" }, "An interrupted receive left a resume token; `ployz volume send --resume-token " + x.resume_token + "` continues it."));
        r.append(el("h2", {}, "Mounted by"));
        if (d.mounts_error) r.append(el("p", { class: "warn", role: "note" }, "Unknown: " + d.mounts_error));
        else if (!d.mounts.length) r.append(el("p", { id: "volume-mounts", class: "muted" }, "No Container mounts it."));
        else r.append(table("volume-mounts", ["Service", "Container", "State", "Path", "Target"], d.mounts.map((m) => el("tr", { "data-container": m.container },
          el("td", {}, el("a", { href: serviceHref(m.namespace, m.service) }, m.service), el("div", { class: "muted" }, m.namespace)),
          el("td", {}, m.container), el("td", {}, st(m.state)), el("td", {}, m.path), el("td", {}, m.target + (m.read_only ? " (read-only)" : ""))))));
        if (d.protection) {
          r.append(el("h2", {}, "Protection"));
          r.append(el("div", { id: "volume-protection", class: d.protection.alert ? "error" : null }, protectionLines(d.protection)));
        }
        r.append(el("h2", {}, "Snapshots"));
        const copies = d.copies || {};
        if (!x.snapshots.length) r.append(el("p", { id: "snapshots", class: "muted" }, "None (`ployz volume snapshot " + x.name + " NAME` takes one)."));
        else r.append(table("snapshots", ["Snapshot", "Created", "Used", "Same point in time", "~GUID"], x.snapshots.map((sn) => el("tr", { "data-snapshot": sn.name },
          el("td", {}, sn.name), el("td", {}, nanoTime(sn.created_unix_nano)), el("td", {}, bytes(sn.used_bytes)),
          el("td", {}, (copies[sn.name] || []).length ? copies[sn.name].map((c) => el("div", {}, el("a", { href: volumeHref(c.machine, c.volume) }, c.volume + "@" + c.snapshot), " on " + c.machine)) : "-"),
          el("td", { class: "hide-narrow" }, sn.guid || "-")))));
        if ((d.unanswered || []).length) r.append(el("p", { class: "muted" }, "No answer from " + d.unanswered.join(", ") + ": copies there are unknown."));
        r.append(el("p", { class: "muted" }, "Snapshots, send, receive and rm stay CLI actions (`ployz volume --help`)."));
      });
    },
  };

  // cert is one hostname's certificate: state, expiry, who differs.
  function cert(c) {
    const until = c.not_after ? " until " + new Date(c.not_after * 1000).toISOString().slice(0, 10) : "";
    return el("div", { "data-cert": c.hostname }, c.hostname + " ", st(c.state), until,
      c.source === "user" ? " (user certificate)" : "",
      c.warning ? el("div", { class: "warn" }, c.warning) : null,
      c.detail ? el("div", { class: "muted" }, c.detail) : null);
  }
  // followLogs follows a Service's logs into pane. A Machine whose stream
  // broke is named in status until the server reopens it; when the whole
  // stream ends it is reopened here, with doubling backoff.
  function followLogs(ns, svc, pane, status) {
    const down = new Map();
    let wait = 1;
    const show = () => {
      status.hidden = down.size === 0;
      status.textContent = [...down.entries()].map(([m, why]) => m + ": " + why).join(" · ");
    };
    const addLine = (text) => {
      pane.append(text + "\n");
      while (pane.childNodes.length > 500) pane.firstChild.remove();
      pane.scrollTop = pane.scrollHeight;
    };
    const line = (l) => {
      if (l.stream === "down") {
        const why = "log stream down (" + l.error + "), reopening in " + l.retry_seconds + "s";
        down.set(l.machine, why); addLine("! " + l.machine + ": " + why);
      } else if (l.stream === "up") {
        down.delete(l.machine); addLine("~ " + l.machine + ": log stream reopened");
      } else if (l.error) addLine("! " + (l.machine ? l.machine + ": " : "") + l.error);
      else addLine(l.machine + " " + l.container + " " + l.time + " | " + l.text);
      show();
    };
    const open = () => {
      const es = new EventSource("api/logs?namespace=" + encodeURIComponent(ns) + "&service=" + encodeURIComponent(svc));
      streams.push(es);
      es.addEventListener("line", (ev) => {
        if (down.delete("every Machine")) { addLine("~ log streams reopened"); show(); }
        wait = 1;
        line(JSON.parse(ev.data));
      });
      es.addEventListener("end", (ev) => {
        es.close();
        const l = JSON.parse(ev.data);
        down.set("every Machine", "log streams ended (" + l.error + "), reopening in " + wait + "s");
        addLine("! " + down.get("every Machine")); show();
        timers.push(setTimeout(open, wait * 1000));
        wait = Math.min(wait * 2, 30);
      });
    };
    open();
  }

  const words = (s) => String(s || "").replace(/_/g, " ");
  // deployRecord is one Deploy as its CLI recorded it: live steps per
  // Machine while it runs, each Machine's outcome after.
  function deployRecord(x) {
    const status = x.stale ? "unknown" : x.status;
    return el("section", { class: "deploy", "data-deploy": x.deployment_id },
      el("h3", {}, x.namespace + " · deployment " + x.deployment_id + (x.revision ? " · revision " + x.revision : "") + " — ", st(words(status)),
        el("span", { class: "muted" }, " " + (x.why ? x.why.split("\n")[0] + " · " : "") + "started " + ago(x.started_at))),
      x.stale ? el("p", { class: "warn" }, "Its CLI has not written this record since " + new Date(x.updated_at).toLocaleTimeString() + ": it stopped or lost its disk; the Machines' Containers show what ran.") : null,
      table("deploy-" + x.deployment_id, ["Machine", "Status", "Steps", "Now / error"],
        (x.machines || []).map((m) => el("tr", { "data-machine": m.machine },
          el("td", {}, m.machine), el("td", {}, st(words(m.status))),
          el("td", {}, m.completed + " completed" + (m.failed ? ", " + m.failed + " failed" : "") + (m.never_attempted ? ", " + m.never_attempted + " never attempted" : "")),
          el("td", {}, (m.in_flight || []).length ? (m.in_flight || []).join("; ") : m.error || m.last || "-")))));
  }

  function renderService(s, r) {
    r.append(unobserved(s.unobserved));
    if (s.deploying) {
      r.append(el("h2", {}, "Deploy running now"));
      r.append(deployRecord(s.deploying));
    }
    r.append(el("p", { id: "status" }, "Execution ", st(s.execution), " (desired " + s.desired + ", running " + s.running + ", ready " + s.ready + ") · Ingress ", st(s.ingress), s.ingress_reason ? " (" + s.ingress_reason + ")" : ""));
    r.append(el("h2", {}, "Containers per Machine"));
    r.append(table("containers", ["Machine", "Container", "State", "Ready", "~Restarts", "~Last exit", "~IP", "~Deployment"],
      (s.containers || []).map((c) => el("tr", { "data-container": c.name }, el("td", {}, c.machine), el("td", {}, c.name), el("td", {}, st(c.state)),
        el("td", {}, c.ready ? "ready" : "not ready"), el("td", { class: "hide-narrow" }, c.restart_count || 0),
        el("td", { class: "hide-narrow" }, c.last_exit), el("td", { class: "hide-narrow" }, c.ip || "-"), el("td", { class: "hide-narrow" }, c.deployment || "-")))));
    if ((s.volumes || []).length || s.volumes_error) {
      r.append(el("h2", {}, "Volumes"));
      if (s.volumes_error) r.append(el("p", { class: "warn", role: "note" }, s.volumes_error));
      if ((s.volumes || []).length) r.append(table("service-volumes", ["Volume", "Machine", "Container", "Target"], s.volumes.map((m) => el("tr", { "data-volume": m.machine + "/" + m.volume },
        el("td", {}, el("a", { href: volumeHref(m.machine, m.volume) }, m.volume)), el("td", {}, m.machine), el("td", {}, m.container),
        el("td", {}, m.target + (m.read_only ? " (read-only)" : ""))))));
    }
    if (s.routes && s.routes.length) {
      r.append(el("h2", {}, "Ingress per Machine"));
      r.append(table("routes", ["Machine", "Route", "State", "Certificate", "~Upstreams"], s.routes.map((x) => el("tr", {},
        el("td", {}, x.machine), el("td", {}, x.route || "-"), el("td", {}, x.error ? st("unknown") : st(x.state), x.error || x.detail ? el("div", { class: "muted" }, x.error || x.detail) : null),
        el("td", {}, x.certificate || "-"), el("td", { class: "hide-narrow" }, (x.upstreams || []).join(", ") || "-")))));
    }
    r.append(el("h2", {}, "Serving Pointer"));
    const sv = s.serving;
    if (!sv) { r.append(el("p", { class: "muted" }, "No Serving Pointer yet.")); return; }
    r.append(el("p", {}, sv.pointer + " (deployment " + sv.deployment + ", " + (sv.containers || []).length + " Container(s))"));
    r.append(table("acks", ["Machine", "Membership", "Ack"], (sv.acks || []).map((a) => el("tr", { "data-ack": a.machine },
      el("td", {}, a.machine), el("td", {}, st(a.membership)),
      el("td", {}, a.acked === sv.pointer ? st("acked") : a.membership === "down" ? "down (not waited for)" : st("pending"))))));
  }

  // si shortens an axis value: 1.5G, 300M, 12k, 0.25.
  function si(v) {
    if (v === null || v === undefined) return "";
    const a = Math.abs(v);
    for (const [n, suffix] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
      if (a >= n) return +(v / n).toFixed(1) + suffix;
    }
    return String(+v.toFixed(3));
  }

  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
  function drawChart(ch, markers, into) {
    const box = el("div", { class: "chart", "data-metric": ch.metric }, el("h3", {}, ch.metric));
    into.append(box);
    const fg = getComputedStyle(document.body).color;
    const width = Math.max(280, box.clientWidth - 12);
    const opts = {
      width, height: 180,
      scales: { x: { time: true } },
      axes: [{ stroke: fg, grid: { stroke: "rgba(128,128,128,.2)" } },
        { stroke: fg, size: 56, grid: { stroke: "rgba(128,128,128,.2)" }, values: (u, vals) => vals.map(si) }],
      series: [{}].concat(ch.series.map((s, i) => ({ label: s.machine, stroke: palette[i % palette.length], width: 1.5, spanGaps: false }))),
      hooks: { draw: [(u) => {
        const ctx = u.ctx;
        ctx.save();
        markers.forEach((m) => {
          if (m.time < u.scales.x.min || m.time > u.scales.x.max) return;
          const x = u.valToPos(m.time, "x", true);
          ctx.strokeStyle = m.kind === "deploy" ? "#1f5fbf" : m.kind === "oom_kill" ? "#b3261e" : "#a35b00";
          ctx.setLineDash([4, 3]);
          ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
        });
        ctx.restore();
      }] },
    };
    const data = [ch.times].concat(ch.series.map((s) => s.values));
    plots.push(new uPlot(opts, data, box));
    const ms = markers.filter((m) => m.time >= ch.times[0]);
    if (ms.length) box.append(el("div", { class: "muted" }, "markers: " + ms.slice(-6).map((m) => m.kind + " on " + m.machine + " " + new Date(m.time * 1000).toLocaleTimeString()).join(", ")));
  }

  function route() {
    stop();
    view.replaceChildren();
    const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
    const name = pages[parts[0]] ? parts[0] : "cluster";
    document.querySelectorAll("nav a").forEach((a) => a.toggleAttribute("aria-current", false));
    const parent = { service: "services", volume: "volumes" }[name] || name;
    const nav = document.querySelector('nav a[data-nav="' + parent + '"]');
    if (nav) nav.setAttribute("aria-current", "page");
    document.title = "Ployz · " + (parent !== name ? parts[2] : name);
    pages[name](parts[1], parts[2]);
    view.focus({ preventScroll: true });
  }
  window.addEventListener("hashchange", route);
  route();
})();
