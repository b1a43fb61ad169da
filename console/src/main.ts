import { render } from "preact";
import { App } from "./app.js";
import { html } from "./ui.js";

/** The console's entry point (bundled by console/tools/build.ts into dist/console/assets). */
render(html`<${App} />`, document.getElementById("app")!);
