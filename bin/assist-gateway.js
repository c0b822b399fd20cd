#!/usr/bin/env node
'use strict'
// Runs the compiled gateway (npm run build writes dist/). `npm ci` builds it through the prepare script.
const { main } = require('../dist/gateway/cli.js')
main(process.argv.slice(2)).then(
  code => {
    if (code >= 0) process.exitCode = code
  },
  err => {
    console.error(err)
    process.exitCode = 1
  }
)
