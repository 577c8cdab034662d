#!/usr/bin/env node
// Generates JSON Schemas (draft-07) for Grafana dashboards and selected panel
// plugin configs from the TypeScript types published in @grafana/schema.
//
//   cd schema && npm ci && npm run generate
//
// Output goes to ../dashgen/schemas/. The output is deterministic: keys are
// sorted recursively, 2-space indent, trailing newline. See README.md for the
// post-processing steps applied on top of ts-json-schema-generator's output.

import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import ts from "typescript";
import {
  DEFAULT_CONFIG,
  SchemaGenerator,
  createFormatter,
  createParser,
} from "ts-json-schema-generator";

const require = createRequire(import.meta.url);
const HERE = dirname(fileURLToPath(import.meta.url));
const OUT_DIR = join(HERE, "..", "dashgen", "schemas");

const GRAFANA_PKG_JSON = require.resolve("@grafana/schema/package.json");
const GRAFANA_DIR = dirname(GRAFANA_PKG_JSON);
const GRAFANA_VERSION = JSON.parse(readFileSync(GRAFANA_PKG_JSON, "utf8")).version;
const GENERATOR_VERSION = JSON.parse(
  readFileSync(require.resolve("ts-json-schema-generator/package.json"), "utf8"),
).version;
const TYPES = join(GRAFANA_DIR, "dist", "types");

// [output file, source .d.ts (relative to dist/types), root type name, title]
const TARGETS = [
  ["grafana-dashboard.schema.json", "raw/dashboard/x/types.gen.d.ts", "Dashboard", "Grafana dashboard"],
  ["panel-heatmap-options.schema.json", "raw/composable/heatmap/panelcfg/x/types.gen.d.ts", "Options", "Grafana heatmap panel options"],
  ["panel-heatmap-fieldconfig.schema.json", "raw/composable/heatmap/panelcfg/x/types.gen.d.ts", "FieldConfig", "Grafana heatmap panel fieldConfig.defaults.custom"],
  ["panel-timeseries-options.schema.json", "raw/composable/timeseries/panelcfg/x/types.gen.d.ts", "Options", "Grafana timeseries panel options"],
  ["panel-timeseries-fieldconfig.schema.json", "raw/composable/timeseries/panelcfg/x/types.gen.d.ts", "FieldConfig", "Grafana timeseries panel fieldConfig.defaults.custom"],
  ["panel-xychart-options.schema.json", "raw/composable/xychart/panelcfg/x/types.gen.d.ts", "Options", "Grafana xychart panel options"],
  ["panel-xychart-fieldconfig.schema.json", "raw/composable/xychart/panelcfg/x/types.gen.d.ts", "FieldConfig", "Grafana xychart panel fieldConfig.defaults.custom"],
];

// Compiler options matter: ts-json-schema-generator's built-in defaults turn
// strictNullChecks OFF, which silently drops `| null` from unions (e.g.
// Dashboard.id would no longer accept null). "bundler" resolution honours the
// package.json "exports"/"types" of @grafana/schema, needed because the
// panelcfg types `import * as common from '@grafana/schema'`.
const COMPILER_OPTIONS = {
  noEmit: true,
  strict: true,
  strictNullChecks: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  skipLibCheck: true,
};

const GEN_CONFIG = {
  ...DEFAULT_CONFIG,
  expose: "export",
  topRef: true,
  jsDoc: "extended",
  sortProps: true,
  skipTypeCheck: false,
  // false => objects without an index signature get "additionalProperties": false
  // (closed, exactly like the TS interfaces). See README.md / post-processing.
  additionalProperties: false,
};

function generate(sourceRel, typeName) {
  const path = join(TYPES, sourceRel);
  const program = ts.createProgram([path], COMPILER_OPTIONS);
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (diagnostics.length) {
    const msg = ts.formatDiagnostics(diagnostics, {
      getCanonicalFileName: (f) => f,
      getCurrentDirectory: () => HERE,
      getNewLine: () => "\n",
    });
    throw new Error(`type check failed for ${sourceRel}:\n${msg}`);
  }
  const config = { ...GEN_CONFIG, path, type: typeName };
  const generator = new SchemaGenerator(
    program,
    createParser(program, config),
    createFormatter(config),
    config,
  );
  return generator.createSchema(typeName);
}

// ---------------------------------------------------------------------------
// Post-processing (documented in README.md)
// ---------------------------------------------------------------------------

// Each step fails loudly if the upstream shape it patches changes, so a
// version bump of @grafana/schema cannot silently skip a fix.
function expect(cond, msg) {
  if (!cond) throw new Error(`post-processing precondition failed: ${msg}`);
}

const DASHBOARD_FIXES = [
  // PP1: VariableModel is ONE flattened interface for every variable kind
  // (query, interval, adhoc, custom, ...). Grafana itself writes kind-specific
  // keys that the type lacks, e.g. `definition` (query variables), `auto`,
  // `auto_count`, `auto_min` (interval), `filters`, `baseFilters`,
  // `defaultKeys` (adhoc). With additionalProperties:false every modern
  // query variable saved by Grafana would be rejected, so open this object.
  // Known properties are still type-checked.
  function openVariableModel(d) {
    expect(d.VariableModel?.additionalProperties === false, "VariableModel is closed");
    d.VariableModel.additionalProperties = true;
  },
  // PP2: Grafana's "Export for sharing externally" (DashboardExporter.ts)
  // writes `"current": {}` for query and datasource variables, but
  // VariableOption requires `text` and `value`. Also accept an empty object.
  function allowEmptyCurrent(d) {
    const cur = d.VariableModel?.properties?.current;
    expect(cur?.$ref === "#/definitions/VariableOption", "VariableModel.current -> VariableOption");
    d.VariableModel.properties.current = {
      anyOf: [{ $ref: cur.$ref }, { maxProperties: 0, type: "object" }],
      description: `${cur.description ?? ""} (dashgen: may also be {} as written by Grafana's external export)`.trim(),
    };
  },
  // PP3: the same export adds top-level `__inputs`, `__requires` and
  // `__elements`, which the Dashboard type does not declare but the import
  // API consumes. Allow them (loosely typed) on the otherwise closed root.
  function allowExportKeys(d) {
    const props = d.Dashboard?.properties;
    expect(props && d.Dashboard.additionalProperties === false, "Dashboard is closed");
    expect(!("__inputs" in props), "Dashboard has no __inputs yet");
    props.__inputs = { description: "dashgen: export-for-sharing inputs (not in @grafana/schema)", items: { type: "object" }, type: "array" };
    props.__requires = { description: "dashgen: export-for-sharing requirements (not in @grafana/schema)", items: { type: "object" }, type: "array" };
    props.__elements = { description: "dashgen: export-for-sharing library panels (not in @grafana/schema)", type: ["object", "array"] };
  },
  // PP4: `panels: Array<Panel | RowPanel>` becomes an anyOf. Panel.type is
  // any string (so "row" too), which means (a) an incomplete row such as
  // {"type":"row","id":1} still validates via the Panel branch, and (b) any
  // error inside a panel is reported only as "not valid under any of the
  // given schemas". Grafana dispatches on `type`, so do the same:
  // type == "row" => RowPanel, otherwise => Panel (draft-07 if/then/else).
  function discriminatePanelsOnType(d) {
    const items = d.Dashboard?.properties?.panels?.items;
    const refs = (items?.anyOf ?? []).map((x) => x.$ref).sort();
    expect(
      refs.length === 2 && refs[0] === "#/definitions/Panel" && refs[1] === "#/definitions/RowPanel",
      "Dashboard.panels items are anyOf [Panel, RowPanel]",
    );
    expect(d.RowPanel?.properties?.type?.const === "row", "RowPanel.type is const 'row'");
    d.Dashboard.properties.panels.items = {
      else: { $ref: "#/definitions/Panel" },
      if: { properties: { type: { const: "row" } }, required: ["type"], type: "object" },
      then: { $ref: "#/definitions/RowPanel" },
    };
  },
];

function postProcess(schema, outFile) {
  if (outFile === "grafana-dashboard.schema.json") {
    for (const fix of DASHBOARD_FIXES) fix(schema.definitions);
  }
  return schema;
}

// Recursively sort object keys (arrays keep their order) for stable output.
function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    const out = {};
    for (const k of Object.keys(value).sort()) out[k] = sortKeys(value[k]);
    return out;
  }
  return value;
}

mkdirSync(OUT_DIR, { recursive: true });
for (const [outFile, sourceRel, typeName, title] of TARGETS) {
  let schema = generate(sourceRel, typeName);
  schema = postProcess(schema, outFile);
  schema.$comment =
    `Generated by schema/generate.mjs from @grafana/schema@${GRAFANA_VERSION} ` +
    `(dist/types/${sourceRel}, type ${typeName}) with ts-json-schema-generator@${GENERATOR_VERSION}. ` +
    `Do not edit by hand; run \`npm run generate\` in schema/.`;
  schema.title = title;
  schema["x-grafana-schema-version"] = GRAFANA_VERSION;
  const text = JSON.stringify(sortKeys(schema), null, 2) + "\n";
  const dest = join(OUT_DIR, outFile);
  writeFileSync(dest, text);
  console.log(`wrote ${relative(process.cwd(), dest)} (${text.length} bytes)`);
}
