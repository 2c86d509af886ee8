import { defineEventHandler } from "nitro/h3";

export default defineEventHandler(() => ({ ok: true }));
