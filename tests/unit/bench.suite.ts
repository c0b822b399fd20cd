import { runFolder } from '../helpers/unit-folder'

runFolder(`${__dirname}/bench`)
