// Generates complex-matcher.golden.json with XO's own filter parser, the npm package
// complex-matcher@0.7.0 (same grammar as XO's current parser, minus [resolve]):
//
//   npm install complex-matcher@0.7.0 lodash@4 && node gen-complex-matcher.js > complex-matcher.golden.json
'use strict'
const { parse, Comparison } = require('complex-matcher')

// complex-matcher 1.x (XO's current source, used by @xen-orchestra/rest-api 0.39.0) compares
// any value, not only numbers; 0.7.0 is the newest version the registry serves here.
Comparison.prototype.match = function (value) {
  return this._comparator(value, this._value)
}

const objects = [
  {
    type: 'VM', name_label: 'k8s-worker-1', name_description: '', power_state: 'Running',
    tags: ['k8s', 'env=prod', 'Backup', 'k8s.xenorchestra/label:zone=a'],
    CPUs: { max: 4, number: 2 }, memory: { size: 8589934592, dynamic: [1073741824, 8589934592], static: [1073741824, 8589934592] },
    addresses: { '0/ipv4/0': '10.0.12.41', '0/ipv6/0': 'fd00::41' }, mainIpAddress: '10.0.12.41',
    $pool: '5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10', $container: 'b61a5c92-700e-4966-a13b-00633f03eea8',
    os_version: { name: 'Ubuntu 24.04 LTS', major: '24' }, auto_poweron: false, startTime: 1760000000,
    VIFs: ['9c4e2f10-7a3b-4d5c-8e6f-1a2b3c4d5e6f', '0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d'], boot: { firmware: 'uefi' },
  },
  {
    type: 'VM', name_label: 'legacy DB (old)', name_description: 'Ünïcödé ß straße', power_state: 'Halted',
    tags: [], CPUs: { max: 1, number: 1 }, memory: { size: 2147483648, dynamic: [2147483648, 2147483648], static: [0, 2147483648] },
    addresses: {}, $pool: '7c3f9a21-4b6e-4d8a-9f10-2e5d7a9c1b34', $container: '7c3f9a21-4b6e-4d8a-9f10-2e5d7a9c1b34',
    os_version: null, auto_poweron: true, startTime: null, VIFs: [], boot: { firmware: 'bios' }, notes: 'a|b "quoted" c:d',
  },
  {
    count: '32', n: 32, neg: -3, frac: 0.5, big: 1e21, flag: true, no: false, empty: '', zero: 0, arr: [], one: [5],
    pair: [1, 2], nested: { deep: { x: 'Value-X', n: 7 } }, nul: null, hex: 31, words: 'Hello World', star: 'a*b',
  },
]

const fixed = [
  '', '   ', 'k8s', 'K8S', 'prod', 'power_state:running', 'power_state:Running', 'power_state:halt',
  'name_label:k8s-*', 'name_label:*worker*', 'name_label:*', 'name_label:/^k8s-worker-1$/', 'name_label:/^K8S/',
  'name_label:/^K8S/i', 'name_label:/worker-\\d/', 'tags:/^k8s$/', 'tags:prod', 'tags:"env=prod"', 'tags:env=prod',
  'tags:"k8s.xenorchestra/label:zone=a"', 'tags:k8s.xenorchestra', '$pool:5e0b1a6c-8f2d-4c39-a1e7-0d9b3c4f2a10',
  '$pool:5e0b1a6c', '$container:b61a5c92', 'uuid:f07ab729', 'CPUs:max:>=4', 'CPUs:max:>4', 'CPUs:max:<4', 'CPUs:max:<=1',
  'CPUs:number:2', 'CPUs:max:4', 'CPUs:max:"4"', 'CPUs:max:=4', 'VIFs:length:>=2', 'VIFs:length:0', 'VIFs:length:>0',
  'memory:size:>=8589934592', 'memory:dynamic:1:>=8589934592', 'memory:static:0:<1', 'boot:firmware:uefi',
  'power_state:|(Running Paused)', 'power_state:|(Halted)', '|(power_state:Running tags:Backup)', '!power_state:Running',
  '!tags:prod', '! tags:prod', 'power_state:Running $pool:5e0b1a6c', '(power_state:Running)', '( power_state:Running k8s )',
  '(power_state:Running', 'power_state:Running)', 'name_label:"legacy DB (old)"', 'name_label:"legacy DB',
  'name_label:legacy DB', 'name_label:"with \\"escaped\\" quote"', 'notes:"a|b"', 'notes:"\\"quoted\\""', 'os_version?',
  '!os_version?', 'auto_poweron?', 'startTime?', 'tags?', 'addresses?', 'name_description?', 'nope?', 'nope:x', '!nope:x',
  'name_description:ünï', 'name_description:ÜNÏ', 'name_description:straße', 'name_description:STRASSE', 'åäöé:ÅÄÖÉ',
  'count:32', 'count:"32"', 'n:32', 'n:"32"', 'n:3', 'count:3', 'n:>=32', 'count:>=32', 'neg:<0', 'neg:-3', 'frac:0.5',
  'frac:.5', 'frac:>0.4', 'big:>1e20', 'flag?', 'no?', 'empty?', 'zero?', 'arr?', 'arr:length:0', 'one:>=5', 'pair:>0',
  'empty:<1', 'nul:<1', 'nul:>=0', 'nope:<1', 'nested:deep:x:value', 'nested:deep:n:7', 'nested:value-x', 'value-x',
  'hex:0x1F', 'hex:0x1f', 'n:0x20', 'n:0b100000', 'n:0o40', 'n:3.2e1', 'words:"hello world"', 'words:hello world',
  'words:Hello*World', 'words:h*o', 'star:"a*b"', 'star:a*b', 'star:*', '*', '**', 'words:/o W/', 'words:/^hello/i',
  'words:/x/ig', 'words:/unterminated', 'words:/a\\/b/', '/Hello/', '/hello/i', 'CPUs:max:> 4', 'CPUs:max:>', 'CPUs:max:>abc',
  'CPUs:max:>=-1', 'CPUs:max:>Infinity', 'CPUs:max:<Infinity', 'n:Infinity', 'a:b:c:d', 'a : b', 'name_label : k8s',
  'name_label:  k8s', 'name_label:', ':k8s', 'name_label::k8s', 'tags:k8s tags:prod', 'tags:k8s  tags:nope',
  '|(tags:nope tags:k8s) power_state:running', '|()', '()', '!', '!!k8s', '!(!k8s)', 'a@b', 'name_label:a@b',
  'name_label:"a@b"', 'foo=bar', 'addresses:"fd00::41"', 'addresses:fd00::41', 'addresses:10.0.12.41', 'addresses:"0/ipv4/0"',
  'tags:"unterminated', 'tags:"trailing\\', 'tags:"trailing\\" k8s', '"quoted prop":x', '"name_label":k8s', '"name_label"?',
  '$pool?', '$pool:', 'CPUs:(max:4 number:2)', 'CPUs:|(max:8 number:2)', 'CPUs:!max:1', 'tags:(k8s prod)', 'tags:|(nope Backup)',
  'x:y:z:(', '((((a', 'a) b', '\tk8s\t', 'k8s\n', 'name_label:k8s-worker-1 ', ' name_label:k8s-worker-1', 'café', 'name_label:日本',
  '日本', 'name_label:"日本"', 'emoji:😀', '"😀"', 'name_label:/[/', 'name_label:/(/', 'name_label:/a{2/', 'name_label:/\\d+$/',
  'name_label:/[^]/', 'name_label:/[]/', 'tags:/\\bprod\\b/', 'name_label:/\\-1/', 'name_label:/\\u006b8s/', 'name_label:/\\x6b8s/',
  'name_label:/k8s-(?:worker|cp)/', 'power_state:/^(Running|Paused)$/', 'a?b', 'a?:b', '>3', '>=3 k8s', '<3', 'n:>31 n:<33',
  '[resolve]', 'a:[b]', 'a:b]', 'a,b', 'a;b', 'a+b', 'a#b', 'a%b', 'a&b', 'a~b', "a'b", 'a`b', 'a^b', 'a{b', 'a}b',
]

// Random filters from the grammar's characters, seeded for reproducibility.
let seed = 42
const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648 }
const alphabet = ['a', 'b', 'K', '8', '0', '1', '_', '-', '.', '$', '*', ':', ' ', '(', ')', '|', '!', '"', '\\', '/', '?', '<', '>', '=', 'é', 'tags', 'n', 'count', 'CPUs', 'max', 'i']
const random = []
for (let i = 0; i < 400; i++) {
  const n = 1 + Math.floor(rand() * 10)
  let s = ''
  for (let j = 0; j < n; j++) s += alphabet[Math.floor(rand() * alphabet.length)]
  random.push(s)
}

const cases = []
for (const filter of [...fixed, ...random]) {
  const c = { filter }
  let node
  try {
    node = parse(filter)
  } catch (e) {
    c.error = e.message
    cases.push(c)
    continue
  }
  try {
    c.matches = objects.map(o => Boolean(node.match(o)))
  } catch (e) {
    c.matchError = e.message
  }
  cases.push(c)
}
process.stdout.write(JSON.stringify({ generator: 'testdata/gen-complex-matcher.js with npm complex-matcher@0.7.0', objects, cases }, null, 1) + '\n')
