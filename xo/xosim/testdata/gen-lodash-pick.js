// Generates lodash-pick.golden.json: what XO's collection entries hold for a fields parameter,
// {...pick(object, fields.split(',')), href}, computed with lodash 4 as XO does:
//
//   npm install lodash@4 && node gen-lodash-pick.js > lodash-pick.golden.json
'use strict'
const pick = require('lodash/pick')

const object = {
  type: 'VM', id: 'vm1', name_label: 'k8s-worker-1', power_state: 'Running',
  CPUs: { max: 4, number: 2 }, memory: { dynamic: [1, 8], static: [1, 8], size: 8 },
  tags: ['k8s', 'prod'], addresses: { '0/ipv4/0': '10.0.0.1' }, os_version: null, 'a.b': 'dotted key',
  nested: { deep: { x: 1, y: [{ z: 'zz' }] } }, empty: {}, $pool: 'p1',
}
const fields = [
  'name_label', 'name_label,power_state', 'power_state,name_label', 'CPUs', 'CPUs.max', 'CPUs.max,CPUs.number',
  'CPUs,CPUs.max', 'CPUs.max,CPUs', 'memory.dynamic[1]', 'memory.dynamic.1', 'memory.dynamic[0],memory.size', 'tags[1]',
  'tags.length', 'name_label.length', 'addresses.0/ipv4/0', 'addresses["0/ipv4/0"]', "addresses['0/ipv4/0']", 'a.b', 'nested.deep.y[0].z',
  'nested.deep.y.0.z', 'nested..deep', 'nested.deep.', '.nested', 'nested[deep]', 'os_version', 'os_version.name', 'missing',
  'missing.x', '', ',', 'name_label,', ' name_label', 'id,id', 'href', '$pool', 'empty', 'empty.x', 'CPUs.max.x',
  'memory.dynamic[5]', 'memory.dynamic[-1]', 'memory.dynamic[1.5]', 'tags[0],tags[1]', 'CPUs[max]', 'CPUs["max"]',
  'name_label,CPUs.max,memory.size,tags,$pool,addresses', '*,id', 'memory.static[1],memory.dynamic[1]',
]
const cases = fields.map(f => ({ fields: f, result: JSON.stringify({ ...pick(object, f.split(',')), href: '/rest/v0/vms/vm1' }) }))
process.stdout.write(JSON.stringify({ object, cases }, null, 1) + '\n')
