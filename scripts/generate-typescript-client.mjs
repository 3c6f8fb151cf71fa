// Writes the TypeScript types of the API from its OpenAPI document (docs/api.md, "Generated
// clients"), beside openapi-typescript and typescript installed with npm:
//   node generate-typescript-client.mjs http://127.0.0.1:8080/api/v1/openapi.json schema.d.ts
// tests/system/test_generated_clients.py runs it with the versions its package-lock.json holds.
// openapi-typescript's Node API rather than its command line, for one thing the command line
// cannot do: type `format: binary` (an upload's `file` part) as a Blob, the way its docs advise,
// instead of a string no upload can be. Any warning the generator prints fails the run, so the
// document stays clean for generators.
import fs from "node:fs";
import ts from "typescript";
import openapiTS, { astToString } from "openapi-typescript";

const [source, output] = process.argv.slice(2);
if (!source || !output) {
  console.error("usage: node generate-typescript-client.mjs <document URL or path> <output .d.ts>");
  process.exit(2);
}

const warnings = [];
const warn = console.warn;
console.warn = (...args) => {
  warnings.push(args.join(" "));
  warn(...args);
};

const BLOB = ts.factory.createTypeReferenceNode(ts.factory.createIdentifier("Blob"));
const ast = await openapiTS(/^https?:/.test(source) ? new URL(source) : fs.readFileSync(source), {
  transform(schemaObject) {
    if (schemaObject.format === "binary") {
      return BLOB;
    }
    return undefined;
  },
});
fs.writeFileSync(output, astToString(ast));
if (warnings.length > 0) {
  console.error(`generate-typescript-client.mjs: openapi-typescript printed ${warnings.length} warning(s)`);
  process.exit(1);
}
